package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

type createProjectBody struct {
	Name          string `json:"name"`
	OwnerEmail    string `json:"ownerEmail"`
	OwnerPassword string `json:"ownerPassword"`
}

func (s *Server) handleCreateProject(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		if r.Method != http.MethodPost {
			return methodNotAllowed("POST")
		}
		var b createProjectBody
		if err := s.decodeBody(w, r, &b); err != nil {
			return err
		}
		if b.Name == "" {
			return badField("name", "invalid_argument", "name is required")
		}
		if b.OwnerEmail == "" {
			return badField("ownerEmail", "invalid_argument", "ownerEmail is required")
		}
		if b.OwnerPassword == "" {
			return badField("ownerPassword", "invalid_argument", "ownerPassword is required")
		}
		ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
		defer cancel()
		res, err := s.accounts.CreateProject(ctx, b.Name, b.OwnerEmail, b.OwnerPassword)
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) {
				if ae := errorFor(err); ae.Field == "email" {
					err = inField("ownerEmail", err)
				} else if ae.Field == "password" {
					err = inField("ownerPassword", err)
				}
			}
			return err
		}
		w.Header().Set("X-Revision", itoa(res.Revision))
		writeJSON(w, http.StatusCreated, res)
		return nil
	}()
	if err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, methodNotAllowed("GET"))
		return
	}
	st, err := s.cluster.Status(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

type setOwnerBody struct {
	Email string `json:"email"`
}

// handleSetOwner makes an account of a project an owner: the operator's
// recovery of a project whose owners are gone or locked out.
func (s *Server) handleSetOwner(w http.ResponseWriter, r *http.Request) {
	err := func() error {
		if r.Method != http.MethodPut {
			return methodNotAllowed("PUT")
		}
		pid := r.PathValue("id")
		if err := raftstore.ValidatePath(pid); err != nil || strings.Contains(pid, "/") || strings.HasPrefix(pid, "_") {
			return badField("id", "invalid_argument", "not a project id")
		}
		var b setOwnerBody
		if err := s.decodeBody(w, r, &b); err != nil {
			return err
		}
		if b.Email == "" {
			return badField("email", "invalid_argument", "email is required")
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.writeTimeout)
		defer cancel()
		if err := s.store.WaitRead(ctx, raftstore.Strong, 0); err != nil {
			return err
		}
		if err := s.accounts.CheckProject(pid); err != nil {
			return err
		}
		u, rev, err := s.accounts.SetOwner(ctx, pid, b.Email)
		if errors.Is(err, auth.ErrUserNotFound) {
			return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no account of the project has this email", Field: "email"}
		}
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]any{"user": u})
	}()
	if err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) handleRemoveNode(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodDelete {
		s.writeError(w, r, methodNotAllowed("DELETE"))
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	if err := s.cluster.RemoveNode(ctx, id); err != nil {
		if errors.Is(err, raftstore.ErrUnknownNode) {
			s.writeError(w, r, newError(http.StatusNotFound, "not_found", "no member with id "+id))
			return
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
}

// handleBackup streams a backup of the whole tree (raftstore's backup
// format). Its revision is known only once the stream is read, so it comes
// as the X-Revision trailer; the file carries it too. A failure before the
// first byte is an ordinary error response; after it, the stream stops
// short and the file fails its own checks (no end record).
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, methodNotAllowed("GET"))
		return
	}
	bw := &backupResponse{w: w, rc: http.NewResponseController(w)}
	// The deadlines bound a client that stops reading (the backup holds a
	// read transaction open); the connection may serve more requests after.
	defer func() { _ = bw.rc.SetWriteDeadline(time.Time{}) }()
	rev, err := s.cluster.Backup(r.Context(), bw)
	if err != nil {
		if !bw.started {
			s.writeError(w, r, err)
			return
		}
		s.logger.Error("backup failed", "request_id", requestID(r.Context()), "err", err)
		return
	}
	w.Header().Set("X-Revision", itoa(rev))
}

// backupStall is how long one write of the backup stream may block.
const backupStall = 2 * time.Minute

// backupResponse sets the stream's headers on its first write, and a write
// deadline on every write.
type backupResponse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (b *backupResponse) Write(p []byte) (int, error) {
	_ = b.rc.SetWriteDeadline(time.Now().Add(backupStall)) // unsupported: no deadline
	if !b.started {
		b.started = true
		h := b.w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", `attachment; filename="edgebase.backup"`)
		// It holds password hashes and sealed secrets: no cache keeps a copy.
		h.Set("Cache-Control", "no-store")
		h.Set("Trailer", "X-Revision")
		b.w.WriteHeader(http.StatusOK)
	}
	return b.w.Write(p)
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz is 200 when a leader is known and this node has applied
// everything the leader had committed a moment ago.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	notReady := func(why string) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": why})
	}
	// A node removed from the cluster says so (the store's Removed).
	if rc, ok := s.cluster.(interface{ Removed() error }); ok {
		if err := rc.Removed(); err != nil {
			notReady(err.Error())
			return
		}
	}
	if s.cluster.LeaderID() == "" {
		notReady("no leader known")
		return
	}
	idx, err := s.cluster.ReadIndex(ctx)
	if err != nil {
		notReady("leader not reachable")
		return
	}
	if err := s.store.WaitApplied(ctx, idx); err != nil {
		notReady("catching up")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "leader": s.cluster.LeaderID(), "appliedIndex": s.cluster.AppliedIndex()})
}
