// pages/signin.js: the Sign in page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'signin',
  title: 'Sign in',
  needs: 'none',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-signin' }, 'Sign in'), h('p', null, 'Not built yet.'));
  },
};
