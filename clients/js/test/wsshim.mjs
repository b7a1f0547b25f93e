// A minimal WebSocket client (RFC 6455, text frames) over node:http, for
// running the tests on a Node without a global WebSocket (Debian's Node 18).
// It has only what the SDK uses: send, close, readyState and the on*
// handlers. The SDK itself takes any such class in createClient's options.
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export class NodeWebSocket {
  constructor(url) {
    this.readyState = 0;
    this.onopen = this.onmessage = this.onerror = this.onclose = null;
    this._buf = Buffer.alloc(0);
    this._parts = [];
    this._closeCode = 1006;
    this._closeReason = '';
    const u = new URL(url);
    const key = crypto.randomBytes(16).toString('base64');
    const req = (u.protocol === 'wss:' ? https : http).request({
      hostname: u.hostname, port: u.port, path: u.pathname + u.search,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13' },
    });
    req.on('upgrade', (res, socket, head) => {
      const want = crypto.createHash('sha1').update(key + GUID).digest('base64');
      if (res.headers['sec-websocket-accept'] !== want) {
        socket.destroy();
        this._fail();
        return;
      }
      this._socket = socket;
      socket.setNoDelay(true);
      socket.on('data', (d) => this._data(d));
      socket.on('close', () => this._closed());
      socket.on('error', () => {});
      this.readyState = 1;
      if (this.onopen) this.onopen({ type: 'open' });
      if (head && head.length) this._data(head);
    });
    req.on('response', (res) => {
      res.resume();
      this._fail();
    });
    req.on('error', () => this._fail());
    req.end();
  }

  send(text) {
    if (this.readyState !== 1) throw new Error('WebSocket is not open');
    this._frame(1, Buffer.from(String(text)));
  }

  close(code = 1000, reason = '') {
    if (this.readyState >= 2) return;
    if (!this._socket) {
      this._fail();
      return;
    }
    this.readyState = 2;
    const r = Buffer.from(reason);
    const p = Buffer.alloc(2 + r.length);
    p.writeUInt16BE(code, 0);
    r.copy(p, 2);
    this._frame(8, p);
    this._closeCode = code;
    const s = this._socket;
    setTimeout(() => s.destroy(), 1000).unref();
  }

  _frame(op, payload) {
    const mask = crypto.randomBytes(4);
    let head;
    if (payload.length < 126) {
      head = Buffer.from([0x80 | op, 0x80 | payload.length]);
    } else if (payload.length < 65536) {
      head = Buffer.alloc(4);
      head[0] = 0x80 | op;
      head[1] = 0x80 | 126;
      head.writeUInt16BE(payload.length, 2);
    } else {
      head = Buffer.alloc(10);
      head[0] = 0x80 | op;
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    const body = Buffer.alloc(payload.length);
    for (let i = 0; i < payload.length; i++) body[i] = payload[i] ^ mask[i & 3];
    this._socket.write(Buffer.concat([head, mask, body]));
  }

  _data(d) {
    this._buf = Buffer.concat([this._buf, d]);
    for (;;) {
      const b = this._buf;
      if (b.length < 2) return;
      let len = b[1] & 0x7f;
      let off = 2;
      if (len === 126) {
        if (b.length < 4) return;
        len = b.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        len = Number(b.readBigUInt64BE(2));
        off = 10;
      }
      if (b.length < off + len) return;
      const fin = (b[0] & 0x80) !== 0;
      const op = b[0] & 0x0f;
      const payload = b.subarray(off, off + len);
      this._buf = b.subarray(off + len);
      if (op === 0 || op === 1 || op === 2) {
        this._parts.push(Buffer.from(payload));
        if (fin) {
          const msg = Buffer.concat(this._parts).toString('utf8');
          this._parts = [];
          if (this.readyState === 1 && this.onmessage) this.onmessage({ data: msg });
        }
      } else if (op === 8) {
        if (payload.length >= 2) {
          this._closeCode = payload.readUInt16BE(0);
          this._closeReason = payload.subarray(2).toString('utf8');
        } else {
          this._closeCode = 1005;
        }
        if (this.readyState === 1) {
          this.readyState = 2;
          this._frame(8, payload.subarray(0, 2));
        }
        this._socket.end();
      } else if (op === 9) {
        this._frame(10, Buffer.from(payload));
      }
    }
  }

  _fail() {
    if (this.readyState === 3) return;
    this.readyState = 3;
    if (this.onerror) this.onerror({ type: 'error' });
    if (this.onclose) this.onclose({ code: 1006, reason: '' });
  }

  _closed() {
    if (this.readyState === 3) return;
    this.readyState = 3;
    if (this.onclose) this.onclose({ code: this._closeCode, reason: this._closeReason });
  }
}
