// pages/signin.js: the Sign in page (see app.js for the page contract).
//
// Two cards: a project owner signs in with the project id, its API key, an
// email and a password (and the authenticator code when TOTP is on); the
// operator of the cluster with the admin token, checked against the cluster
// before it is stored. Each card shows who is signed in, with a sign-out.
// ?project=&key= prefill the owner's form (the projects page links here).
import { h, append, replace, field, button, errorBox } from '../dom.js';
import { state } from '../state.js';

function input(id, attrs) {
  return h('input', { id, name: id, spellcheck: 'false', autocapitalize: 'off', ...attrs });
}

/** busy disables a form's controls while fn runs, and shows errors in status. */
async function busy(form, status, fn) {
  const controls = [...form.querySelectorAll('input, button')];
  for (const c of controls) c.disabled = true;
  replace(status);
  try {
    await fn();
  } catch (err) {
    replace(status, errorBox(err));
  } finally {
    for (const c of controls) if (c.isConnected) c.disabled = false;
  }
}

function ownerCard(ctx) {
  const card = h('section', { id: 'signin-owner', class: 'card stack', 'aria-labelledby': 'signin-owner-title' },
    h('h2', { id: 'signin-owner-title' }, 'Project owner'));
  const c = state.client();
  if (c) {
    const user = c.auth.user();
    card.append(
      h('p', null, 'Signed in as ', h('strong', null, user?.email || user?.id || 'the owner'),
        ' on project ', h('code', null, c.projectId), '.'),
      h('div', { class: 'row' },
        h('a', { class: 'button', href: '#/data' }, 'Open the data'),
        button('Sign out', async (ev) => {
          ev.currentTarget.disabled = true;
          await state.signOut();
        }, { id: 'signin-owner-signout', class: 'secondary' })));
    return card;
  }

  const last = state.last() || {};
  const project = input('signin-project', { required: true, autocomplete: 'off', value: ctx.params.get('project') || last.projectId || '' });
  const key = input('signin-key', { required: true, autocomplete: 'off', value: ctx.params.get('key') || (ctx.params.get('project') ? '' : last.apiKey || '') });
  const email = input('signin-email', { type: 'email', required: true, autocomplete: 'username', value: last.email || '' });
  const password = input('signin-password', { type: 'password', required: true, autocomplete: 'current-password' });
  const status = h('div', { id: 'signin-owner-status', 'aria-live': 'polite' });
  const body = h('div', { class: 'stack' });

  const finish = async (client) => {
    const user = client.auth.user();
    if (!user || user.role !== 'owner') {
      try { await client.auth.logout(); } catch { /* signed out either way */ }
      client.close();
      throw new Error(`${user?.email || 'This account'} is not an owner of project ${client.projectId}: ` +
        'the console is for the owners of a project. Ask an owner to give you the owner role.');
    }
    state.signedIn(client);
    client.close();
    ctx.navigate('data');
  };

  const passwordStep = () => {
    const form = h('form', { id: 'signin-owner-form', class: 'stack', 'aria-describedby': 'signin-owner-status', on: {
      submit: (ev) => {
        ev.preventDefault();
        busy(form, status, async () => {
          const client = state.newClient(project.value.trim(), key.value.trim());
          let answer;
          try {
            answer = await client.auth.login(email.value.trim(), password.value);
          } catch (err) {
            client.close();
            throw err;
          }
          if (answer.requiresTotp) {
            password.value = '';
            codeStep(client, answer.loginTicket);
            return;
          }
          password.value = '';
          await finish(client);
        });
      },
    } },
    field('Project id', project),
    field('API key', key, 'The project\'s API key (shown when the project was created).'),
    field('Email', email),
    field('Password', password),
    h('div', { class: 'row' }, h('button', { id: 'signin-owner-submit', type: 'submit' }, 'Sign in')));
    replace(body, form);
  };

  const codeStep = (client, ticket) => {
    const code = input('signin-code', { required: true, inputmode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}', maxlength: '6' });
    const form = h('form', { id: 'signin-totp-form', class: 'stack', on: {
      submit: (ev) => {
        ev.preventDefault();
        busy(form, status, async () => {
          await client.auth.loginVerify(ticket, code.value.trim());
          await finish(client);
        });
      },
    } },
    h('p', null, 'This account has two-step sign-in. Enter the 6-digit code of your authenticator app.'),
    field('Authenticator code', code),
    h('div', { class: 'row' },
      h('button', { id: 'signin-totp-submit', type: 'submit' }, 'Verify'),
      button('Back', () => { client.close(); replace(status); passwordStep(); password.focus(); }, { class: 'secondary' })));
    replace(body, form);
    replace(status);
    code.focus();
  };

  passwordStep();
  card.append(body, status);
  return card;
}

function operatorCard(ctx) {
  const card = h('section', { id: 'signin-operator', class: 'card stack', 'aria-labelledby': 'signin-operator-title' },
    h('h2', { id: 'signin-operator-title' }, 'Cluster operator'));
  if (state.operator()) {
    card.append(
      h('p', null, 'Signed in as the operator of the cluster at ', h('code', null, location.host), '.'),
      h('div', { class: 'row' },
        h('a', { class: 'button', href: '#/projects' }, 'Open the projects'),
        button('Sign out', () => state.clearOperator(), { id: 'signin-operator-signout', class: 'secondary' })));
    return card;
  }
  const token = input('signin-token', { type: 'password', required: true, autocomplete: 'off' });
  const status = h('div', { id: 'signin-operator-status', 'aria-live': 'polite' });
  const form = h('form', { id: 'signin-operator-form', class: 'stack', on: {
    submit: (ev) => {
      ev.preventDefault();
      busy(form, status, async () => {
        const value = token.value.trim();
        // The token is checked against the cluster before it is kept.
        await ctx.sdk.createOperator({ url: location.origin, adminToken: value }).cluster.status();
        token.value = '';
        state.setOperator(value);
        ctx.navigate('projects');
      });
    },
  } },
  field('Admin token', token, 'The --admin-token of the cluster\'s nodes.'),
  h('div', { class: 'row' }, h('button', { id: 'signin-operator-submit', type: 'submit' }, 'Sign in as operator')));
  card.append(form, status);
  return card;
}

export default {
  id: 'signin',
  title: 'Sign in',
  needs: 'none',
  async render(root, ctx) {
    const notice = state.takeNotice();
    append(root, [
      h('h1', { id: 'h-signin' }, 'Sign in'),
      notice ? h('p', { class: 'error notice', role: 'alert' }, notice) : null,
      h('p', { class: 'muted' }, 'The console of this edgebase node. Project owners manage their project\'s data, rules, ' +
        'users and push; the cluster\'s operator manages projects and nodes. Both may be signed in at once.'),
      h('div', { class: 'split' }, ownerCard(ctx), operatorCard(ctx))]);
  },
};
