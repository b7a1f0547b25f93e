// pages/push.js: the Push page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'push',
  title: 'Push',
  needs: 'owner',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-push' }, 'Push'), h('p', null, 'Not built yet.'));
  },
};
