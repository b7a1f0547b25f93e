// pages/cluster.js: the Cluster page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'cluster',
  title: 'Cluster',
  needs: 'operator',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-cluster' }, 'Cluster'), h('p', null, 'Not built yet.'));
  },
};
