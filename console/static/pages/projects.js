// pages/projects.js: the Projects page (see app.js for the page contract).
// The operator's view of every project of the cluster (paged), a form that
// creates one (its API key is shown once, here, and never again), and a
// "Make owner" form per project (the recovery of a project whose owners are
// gone).
import { h, replace, field, button, errorBox, errorText, table, time } from '../dom.js';

/** humanBytes(n) is n bytes as "1.4 MB" (powers of 1024, one decimal above bytes). */
export function humanBytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return '';
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

const PAGE = 100;

export default {
  id: 'projects',
  title: 'Projects',
  needs: 'operator',
  async render(root, ctx) {
    const op = ctx.operator;
    const alive = () => !ctx.signal.aborted;

    // ---- the list, paged
    let projects = [];
    let cursor = '';
    const listArea = h('div', { class: 'projects-list', 'aria-live': 'polite', 'aria-busy': 'true' });
    const listError = h('div');
    const more = button('Load more', () => load(false), { class: 'secondary', id: 'projects-more', hidden: true });
    const refresh = button('Refresh', () => load(true), { class: 'secondary', id: 'projects-refresh' });

    function draw() {
      const cols = [
        { label: 'ID', get: (p) => h('span', { class: 'mono' }, p.id) },
        { label: 'Name', get: (p) => p.name },
        { label: 'Created', get: (p) => h('time', { datetime: p.createdAt }, time(p.createdAt)) },
        { label: 'Documents', get: (p) => h('span', { class: 'projects-docs', 'data-documents': String(p.documents ?? '') }, approx(p), fmtCount(p.documents)) },
        { label: 'Size', get: (p) => h('span', { class: 'projects-bytes', 'data-bytes': String(p.bytes ?? ''), title: `${p.bytes ?? 0} bytes of documents' JSON` }, approx(p), humanBytes(p.bytes)) },
        {
          label: 'Last write',
          get: (p) => (p.lastWrite
            ? h('span', { class: 'projects-last', 'data-revision': String(p.lastWrite.revision) },
              `revision ${p.lastWrite.revision}`, h('br'), h('time', { class: 'muted', datetime: p.lastWrite.time }, time(p.lastWrite.time)))
            : h('span', { class: 'projects-last muted', 'data-revision': '' }, 'never')),
        },
        { label: 'Owner', get: (p) => ownerForm(p) },
      ];
      const t = table(cols, projects, { caption: `${projects.length} project${projects.length === 1 ? '' : 's'}${cursor ? ' (more to load)' : ''}`, empty: 'No projects yet.' });
      const rows = t.querySelectorAll('tbody tr');
      if (projects.length) rows.forEach((tr, i) => tr.setAttribute('data-project', projects[i].id));
      replace(listArea, t);
      listArea.setAttribute('aria-busy', 'false');
      more.hidden = !cursor;
    }

    async function load(fromStart) {
      listArea.setAttribute('aria-busy', 'true');
      replace(listError);
      try {
        const page = await op.projects.list({ limit: PAGE, cursor: fromStart ? '' : cursor });
        if (!alive()) return;
        projects = fromStart ? page.projects || [] : projects.concat(page.projects || []);
        cursor = page.nextCursor || '';
        draw();
      } catch (err) {
        if (!alive()) return;
        listArea.setAttribute('aria-busy', 'false');
        replace(listError, errorBox(err));
      }
    }

    // "Make owner": a small form per project, folded in a <details>.
    function ownerForm(p) {
      const email = h('input', { type: 'email', name: 'email', autocomplete: 'off', required: true, class: 'projects-owner-email' });
      const out = h('p', { class: 'projects-owner-out', role: 'status' });
      const submit = h('button', { type: 'submit', class: 'small' }, 'Make owner');
      const form = h('form', {
        class: 'stack',
        on: {
          submit: async (ev) => {
            ev.preventDefault();
            submit.disabled = true;
            replace(out);
            out.className = 'projects-owner-out';
            try {
              const r = await op.projects.setOwner(p.id, email.value.trim());
              if (!alive()) return;
              out.classList.add('ok');
              replace(out, `${r.user.email} is now an owner of ${p.id}.`);
              email.value = '';
            } catch (err) {
              if (!alive()) return;
              out.classList.add('error');
              replace(out, errorText(err));
              if (err.field === 'email') email.setAttribute('aria-invalid', 'true');
            } finally {
              submit.disabled = false;
            }
          },
        },
      }, field(`Email of an account of ${p.name || p.id}`, email), submit, out);
      email.addEventListener('input', () => email.removeAttribute('aria-invalid'));
      // The form is hidden while the fold is closed, so nothing in it counts
      // as shown (a closed <details> keeps its content's boxes in Chromium).
      form.hidden = true;
      const fold = h('details', { class: 'projects-owner', on: { toggle: () => { form.hidden = !fold.open; } } }, h('summary', null, 'Make owner'), form);
      return fold;
    }

    // ---- create
    const name = h('input', { type: 'text', name: 'name', id: 'projects-name', required: true, autocomplete: 'off' });
    const ownerEmail = h('input', { type: 'email', name: 'ownerEmail', id: 'projects-owner-email', required: true, autocomplete: 'off' });
    const ownerPassword = h('input', { type: 'password', name: 'ownerPassword', id: 'projects-owner-password', required: true, autocomplete: 'new-password' });
    const inputs = { name, ownerEmail, ownerPassword };
    const createBtn = h('button', { type: 'submit', id: 'projects-create' }, 'Create project');
    const createError = h('div');
    const created = h('div', { class: 'projects-created-slot' });

    const form = h('form', {
      class: 'stack',
      'aria-labelledby': 'projects-create-h',
      on: {
        submit: async (ev) => {
          ev.preventDefault();
          replace(createError);
          for (const el of Object.values(inputs)) el.removeAttribute('aria-invalid');
          createBtn.disabled = true;
          try {
            const r = await op.projects.create({ name: name.value.trim(), ownerEmail: ownerEmail.value.trim(), ownerPassword: ownerPassword.value });
            if (!alive()) return;
            ownerPassword.value = '';
            showCreated(r);
            load(true);
          } catch (err) {
            if (!alive()) return;
            replace(createError, errorBox(err));
            const bad = inputs[err.field];
            if (bad) {
              bad.setAttribute('aria-invalid', 'true');
              bad.focus();
            }
          } finally {
            createBtn.disabled = false;
          }
        },
      },
    },
    h('div', { class: 'row' },
      field('Project name', name),
      field('Owner email', ownerEmail),
      field('Owner password', ownerPassword)),
    h('div', { class: 'row' }, createBtn),
    createError);

    // The answer of a create, shown once: it lives only in this render, so
    // leaving the page forgets the key.
    function showCreated(r) {
      const keyEl = h('code', { id: 'projects-new-key', class: 'mono projects-key' }, r.apiKey);
      const copyOut = h('span', { role: 'status', class: 'muted' });
      const copy = button('Copy', async () => {
        try {
          if (!navigator.clipboard || !navigator.clipboard.writeText) throw new Error('the clipboard is not available here: select the key and copy it');
          await navigator.clipboard.writeText(r.apiKey);
          replace(copyOut, 'Copied.');
        } catch (err) {
          replace(copyOut, errorText(err));
        }
      }, { class: 'small secondary', id: 'projects-copy-key', 'aria-label': 'Copy the API key' });
      const signin = `#/signin?${new URLSearchParams({ project: r.projectId, key: r.apiKey })}`;
      const card = h('section', { class: 'card projects-created', 'aria-labelledby': 'projects-created-h', 'data-project': r.projectId },
        h('h2', { id: 'projects-created-h', tabindex: '-1' }, `Project ${r.projectId} created`),
        h('dl', { class: 'projects-dl' },
          h('dt', null, 'Project ID'), h('dd', null, h('code', { id: 'projects-new-id', class: 'mono' }, r.projectId)),
          h('dt', null, 'API key'), h('dd', null, keyEl, ' ', copy, ' ', copyOut),
          h('dt', null, 'Owner'), h('dd', null, h('span', { class: 'mono' }, r.ownerId))),
        h('p', { class: 'warn projects-warning', role: 'note' },
          'Copy the API key now: it is not shown again (the cluster keeps only its hash). ',
          'A lost key is replaced by creating a new one as the owner.'),
        h('p', null, h('a', { href: signin, id: 'projects-signin-link' }, 'Sign in to this project as its owner')),
        button('Dismiss', () => replace(created), { class: 'small secondary' }));
      replace(created, card);
      card.querySelector('h2').focus();
    }

    root.append(
      h('h1', { id: 'h-projects' }, 'Projects'),
      h('p', { class: 'muted' }, 'Every project of the cluster, as the operator sees it. Documents and size count the project\'s stored documents (not its accounts or settings); last write is its most recently written document still stored.'),
      created,
      h('section', { class: 'card', 'aria-labelledby': 'projects-list-h' },
        h('div', { class: 'toolbar' }, h('h2', { id: 'projects-list-h', class: 'grow' }, 'All projects'), refresh),
        listError, listArea, h('div', { class: 'row' }, more)),
      h('section', { class: 'card', 'aria-labelledby': 'projects-create-h' },
        h('h2', { id: 'projects-create-h' }, 'Create a project'), form),
    );
    await load(true);
  },
};

/** approx(p) marks the figures of a project whose count was cut short (lower bounds). */
function approx(p) {
  return p.approximate ? h('abbr', { title: 'at least: the count stopped at the scan limit', class: 'projects-approx' }, '≥ ') : null;
}

function fmtCount(n) {
  return typeof n === 'number' ? n.toLocaleString() : '';
}
