// pages/projects.js: the Projects page (see app.js for the page contract).
import { h } from '../dom.js';

export default {
  id: 'projects',
  title: 'Projects',
  needs: 'operator',
  async render(root, ctx) {
    root.append(h('h1', { id: 'h-projects' }, 'Projects'), h('p', null, 'Not built yet.'));
  },
};
