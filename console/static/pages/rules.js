// pages/rules.js: the Rules page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'rules',
  title: 'Rules',
  needs: 'owner',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-rules' }, 'Rules'), h('p', null, 'Not built yet.'));
  },
};
