package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Named API keys. The project record's KeyHashes stays the one list
// CheckAPIKey compares against (every hash, in constant time), so a request
// costs one read whatever the number of keys; each named key also has a
// record at keys.APIKey with its name, prefix and creation time, written in
// the same txn as its hash. Hashes of KeyHashes that no record names are
// the keys from before names (the project's first key): they show, and are
// deleted, as the key "default".
//
// The project record is cluster-wide state, which a caller's txn may not
// write, so owner writes here are system writes guarded by the revisions of
// the owner's session and account as judged (ownerGuard): a role change, a
// disable or a revoked session meanwhile makes them judged again.

// MaxAPIKeys bounds a project's API keys.
const MaxAPIKeys = 50

// DefaultKeyID names the project's keys from before named keys.
const DefaultKeyID = "default"

// keyPrefixLen is how much of a key its listing shows: "ebk_" and 8
// characters, enough to tell keys apart, far too little to guess one.
const keyPrefixLen = len(apiKeyPrefix) + 8

// maxKeyName bounds a key's name (characters).
const maxKeyName = 100

// apiKey is the stored record of a named key (the secret only as its hash).
type apiKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Hash      string `json:"hash"`
	Prefix    string `json:"prefix"`
	CreatedAt string `json:"createdAt"`
}

// APIKeyInfo is an API key as the listing shows it.
type APIKeyInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
	Prefix    string `json:"prefix"`
}

// CreatedAPIKey is the answer to a key's creation: the only time the key
// itself is shown.
type CreatedAPIKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Key       string `json:"key"`
	CreatedAt string `json:"createdAt"`
	// Prefix is what the listing will show of the key (the contract's
	// answer has the whole key, so not this).
	Prefix   string `json:"-"`
	Revision uint64 `json:"-"`
}

// ownerGuard judges that p's session is live and its account an enabled
// owner, on this node's state, and returns the conditions that make a txn
// commit only while both are as judged.
func (s *Service) ownerGuard(p *Principal) ([]raftstore.Cond, error) {
	sdoc, sess, err := s.sessionDoc(p.Session)
	if err != nil {
		return nil, err
	}
	acc, arev, err := s.accountRev(p.ProjectID, p.UserID)
	if err != nil {
		return nil, err
	}
	if acc == nil || sess.ProjectID != p.ProjectID || sess.UserID != p.UserID || sess.Gen != acc.SessionGen ||
		acc.Disabled || s.now().Unix() >= sess.ExpiresAt {
		return nil, ErrInvalidToken
	}
	if acc.Role != RoleOwner {
		return nil, ErrForbidden
	}
	return []raftstore.Cond{
		{Path: sdoc.Path, Kind: raftstore.CondRevision, Revision: sdoc.Revision},
		{Path: keys.User(p.ProjectID, p.UserID), Kind: raftstore.CondRevision, Revision: arev},
	}, nil
}

// projectKeys reads the project record with its revision and the named
// keys' records.
func (s *Service) projectKeys(pid string) (*project, uint64, []apiKey, error) {
	doc, err := s.store.Get(keys.Project(pid))
	if err != nil {
		return nil, 0, nil, err
	}
	if doc == nil {
		return nil, 0, nil, ErrProjectNotFound
	}
	var p project
	if err := decodeJSON(doc, &p); err != nil {
		return nil, 0, nil, err
	}
	var named []apiKey
	after := ""
	for {
		docs, next, err := s.store.List(keys.APIKeysDir(pid), after, MaxAPIKeys+1)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("list API keys: %w", err)
		}
		for _, d := range docs {
			var k apiKey
			if decodeJSON(d, &k) == nil {
				named = append(named, k)
			}
		}
		if next == "" {
			return &p, doc.Revision, named, nil
		}
		after = next
	}
}

// keyHashCache remembers each project's KeyHashes with the revision of the
// project record they were decoded from, so that the key check every
// request makes reads the record but decodes it only when it changed (50
// keys made the decode 6x the cost of the check). The answer is the
// record's either way.
type keyHashCache struct {
	mu sync.Mutex
	m  map[string]cachedKeyHashes // by project id
}

type cachedKeyHashes struct {
	rev    uint64
	hashes []string
}

// maxCachedProjects bounds keyHashCache; past it the cache starts over.
const maxCachedProjects = 4096

// projectKeyHashes returns the API key hashes of project pid (none when
// there is no such project).
func (s *Service) projectKeyHashes(pid string) ([]string, error) {
	doc, err := s.store.Get(keys.Project(pid))
	if err != nil || doc == nil {
		return nil, err
	}
	c := &s.keyHashes
	c.mu.Lock()
	e, ok := c.m[pid]
	c.mu.Unlock()
	if ok && e.rev == doc.Revision {
		return e.hashes, nil
	}
	var p project
	if err := decodeJSON(doc, &p); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedProjects {
		c.m = map[string]cachedKeyHashes{}
	}
	c.m[pid] = cachedKeyHashes{rev: doc.Revision, hashes: p.KeyHashes}
	c.mu.Unlock()
	return p.KeyHashes, nil
}

// legacyHashes are the hashes of p.KeyHashes no named key holds.
func legacyHashes(p *project, named []apiKey) []string {
	var out []string
	for _, h := range p.KeyHashes {
		if !slices.ContainsFunc(named, func(k apiKey) bool { return k.Hash == h }) {
			out = append(out, h)
		}
	}
	return out
}

// ListAPIKeys lists the caller's project's keys (owners only): "default"
// first when the project still has keys from before names, then the named
// keys in id order.
func (s *Service) ListAPIKeys(p *Principal) ([]APIKeyInfo, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	proj, _, named, err := s.projectKeys(p.ProjectID)
	if err != nil {
		return nil, err
	}
	out := []APIKeyInfo{}
	if len(legacyHashes(proj, named)) > 0 {
		out = append(out, APIKeyInfo{ID: DefaultKeyID, Name: DefaultKeyID, CreatedAt: proj.CreatedAt, Prefix: apiKeyPrefix})
	}
	for _, k := range named {
		// A record whose hash left KeyHashes is not a key (never written so,
		// but the listing must not show a key that does not work).
		if slices.Contains(proj.KeyHashes, k.Hash) {
			out = append(out, APIKeyInfo{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt, Prefix: k.Prefix})
		}
	}
	return out, nil
}

// CreateAPIKey creates a named key for the caller's project (owners only)
// and returns it: its secret is shown this once and stored only hashed.
func (s *Service) CreateAPIKey(ctx context.Context, p *Principal, name, addr string) (*CreatedAPIKey, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > maxKeyName {
		return nil, &FieldError{Field: "name", Err: fmt.Errorf("%w: name must be 1..%d characters", ErrInvalidArgument, maxKeyName)}
	}
	id, err := NewID()
	if err != nil {
		return nil, err
	}
	key, err := NewToken(apiKeyPrefix)
	if err != nil {
		return nil, err
	}
	now := s.now()
	rec := apiKey{ID: id, Name: name, Hash: HashToken(key), Prefix: key[:keyPrefixLen], CreatedAt: timestamp(now)}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		guard, err := s.ownerGuard(p)
		if err != nil {
			return nil, err
		}
		proj, prev, _, err := s.projectKeys(p.ProjectID)
		if err != nil {
			return nil, err
		}
		if len(proj.KeyHashes) >= MaxAPIKeys {
			return nil, ErrTooManyKeys
		}
		proj.KeyHashes = append(proj.KeyHashes, rec.Hash)
		return &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: append([]raftstore.Cond{
				{Path: keys.Project(p.ProjectID), Kind: raftstore.CondRevision, Revision: prev},
				{Path: keys.APIKey(p.ProjectID, id), Kind: raftstore.CondNotExists},
			}, guard...),
			Ops: []raftstore.Op{
				{Kind: raftstore.OpPut, Path: keys.Project(p.ProjectID), Data: mustJSON(proj)},
				{Kind: raftstore.OpPut, Path: keys.APIKey(p.ProjectID, id), Data: mustJSON(rec)},
				s.auditOp(p.ProjectID, AuditEvent{Type: AuditKeyCreated, UserID: p.UserID, Address: addr,
					Detail: map[string]string{"keyId": id, "name": name}}),
			}}, nil
	})
	if err != nil {
		return nil, err
	}
	if !res.OK() {
		return nil, fmt.Errorf("create API key refused: %s", res.Err)
	}
	return &CreatedAPIKey{ID: id, Name: name, Key: key, CreatedAt: rec.CreatedAt, Prefix: rec.Prefix, Revision: res.Revision}, nil
}

// DeleteAPIKey deletes key id of the caller's project (owners only):
// from the commit on, the key fails on every node that reads after it
// (CheckAPIKey after a strong sync). "default" deletes the keys from before
// names. Deleting the last key is ErrLastKey.
func (s *Service) DeleteAPIKey(ctx context.Context, p *Principal, id, addr string) (uint64, error) {
	if p.Role != RoleOwner {
		return 0, ErrForbidden
	}
	if id == "" || len(id) > 100 || strings.ContainsAny(id, "/\x00") || keys.IsReserved(id) {
		return 0, ErrKeyNotFound
	}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		guard, err := s.ownerGuard(p)
		if err != nil {
			return nil, err
		}
		proj, prev, named, err := s.projectKeys(p.ProjectID)
		if err != nil {
			return nil, err
		}
		var gone []string
		var ops []raftstore.Op
		conds := append([]raftstore.Cond{{Path: keys.Project(p.ProjectID), Kind: raftstore.CondRevision, Revision: prev}}, guard...)
		if id == DefaultKeyID {
			gone = legacyHashes(proj, named)
		} else {
			i := slices.IndexFunc(named, func(k apiKey) bool { return k.ID == id })
			if i >= 0 {
				gone = []string{named[i].Hash}
				path := keys.APIKey(p.ProjectID, id)
				ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: path})
				conds = append(conds, raftstore.Cond{Path: path, Kind: raftstore.CondExists})
			}
		}
		if len(gone) == 0 {
			return nil, ErrKeyNotFound
		}
		proj.KeyHashes = slices.DeleteFunc(proj.KeyHashes, func(h string) bool { return slices.Contains(gone, h) })
		if len(proj.KeyHashes) == 0 {
			return nil, ErrLastKey
		}
		ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Project(p.ProjectID), Data: mustJSON(proj)},
			s.auditOp(p.ProjectID, AuditEvent{Type: AuditKeyDeleted, UserID: p.UserID, Address: addr, Detail: map[string]string{"keyId": id}}))
		return &raftstore.Txn{Time: s.now().UnixNano(), Conds: conds, Ops: ops}, nil
	})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, fmt.Errorf("delete API key refused: %s", res.Err)
	}
	return res.Revision, nil
}
