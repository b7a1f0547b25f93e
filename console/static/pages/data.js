// pages/data.js: the Data page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'data',
  title: 'Data',
  needs: 'owner',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-data' }, 'Data'), h('p', null, 'Not built yet.'));
  },
};
