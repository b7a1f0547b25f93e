// pages/users.js: the Users page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'users',
  title: 'Users',
  needs: 'owner',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-users' }, 'Users'), h('p', null, 'Not built yet.'));
  },
};
