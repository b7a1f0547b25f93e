package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/edgebase/edgebase/push"
)

// Push is the push notification service.
type Push interface {
	SetEnabled(ctx context.Context, c push.Caller, enabled bool) (uint64, error)
	Enabled(pid string) (bool, error)
	SetCredentials(ctx context.Context, c push.Caller, raw []byte) (*push.CredentialsInfo, uint64, error)
	Credentials(c push.Caller) (*push.CredentialsInfo, error)
	Register(ctx context.Context, c push.Caller, token, platform string) (*push.Device, uint64, error)
	Unregister(ctx context.Context, c push.Caller, token string) (uint64, error)
	Devices(c push.Caller) ([]push.Device, error)
	Subscribe(ctx context.Context, c push.Caller, topic string) (uint64, error)
	Unsubscribe(ctx context.Context, c push.Caller, topic string) (uint64, error)
	Topics(c push.Caller) ([]string, error)
	DevicesOf(c push.Caller, uid string) ([]push.Device, error)
	TopicsOf(c push.Caller, uid string) ([]string, error)
	ProjectTopics(c push.Caller) ([]push.TopicCount, bool, error)
	Send(ctx context.Context, c push.Caller, t push.Target, content push.Content) (*push.Notification, uint64, error)
	Schedule(ctx context.Context, c push.Caller, t *push.Target, content push.Content, sendAt string) (*push.Schedule, uint64, error)
	Schedules(c push.Caller, limit int, cursor string) (*push.Page[push.Schedule], error)
	CancelSchedule(ctx context.Context, c push.Caller, id string) (*push.Schedule, uint64, error)
	History(c push.Caller, limit int, cursor string) (*push.Page[push.HistoryItem], error)
	Prefs(c push.Caller) (push.Prefs, error)
	SetPrefs(ctx context.Context, c push.Caller, u *push.PrefsUpdate) (push.Prefs, uint64, error)
}

func (s *Server) pushRoutes() {
	h := func(method string, fn func(w http.ResponseWriter, r *http.Request, c push.Caller) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := s.pushCall(w, r, method, fn); err != nil {
				s.writeError(w, r, err)
			}
		}
	}
	s.mux.HandleFunc("/api/notifications/toggle-push", h("GET,POST", s.pushToggle))
	s.mux.HandleFunc("/api/notifications/register", h(http.MethodPost, s.pushRegister))
	s.mux.HandleFunc("/api/notifications/unregister", h(http.MethodPost, s.pushUnregister))
	s.mux.HandleFunc("/api/notifications/devices", h(http.MethodGet, s.pushDevices))
	s.mux.HandleFunc("/api/notifications/subscribe", h(http.MethodPost, s.pushSubscribe(true)))
	s.mux.HandleFunc("/api/notifications/unsubscribe", h(http.MethodPost, s.pushSubscribe(false)))
	s.mux.HandleFunc("/api/notifications/topics", h(http.MethodGet, s.pushTopics))
	s.mux.HandleFunc("/api/notifications/project-topics", h(http.MethodGet, s.pushProjectTopics))
	s.mux.HandleFunc("/api/notifications/send-to-project/{projectId}", h(http.MethodPost, s.pushSendProject))
	s.mux.HandleFunc("/api/notifications/send-to-user/{userId}", h(http.MethodPost, s.pushSendUser))
	s.mux.HandleFunc("/api/notifications/send-to-topic", h(http.MethodPost, s.pushSendTopic))
	s.mux.HandleFunc("/api/notifications/schedule", h(http.MethodPost, s.pushSchedule))
	s.mux.HandleFunc("/api/notifications/scheduled", h(http.MethodGet, s.pushScheduled))
	s.mux.HandleFunc("/api/notifications/scheduled/{id}", h(http.MethodDelete, s.pushCancel))
	s.mux.HandleFunc("/api/notifications/history", h(http.MethodGet, s.pushHistory))
	s.mux.HandleFunc("/api/notifications/preferences", h("GET,PUT", s.pushPrefs))
	s.mux.HandleFunc("/api/notifications/fcm-credentials", h("GET,PUT", s.pushCredentials))
}

// pushCall checks the method, the project key and the bearer token (in that
// order, before any body is read) and runs fn with the caller.
func (s *Server) pushCall(w http.ResponseWriter, r *http.Request, method string, fn func(http.ResponseWriter, *http.Request, push.Caller) error) error {
	switch method {
	case "GET,POST":
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			return methodNotAllowed("GET", "POST")
		}
	case "GET,PUT":
		if r.Method != http.MethodGet && r.Method != http.MethodPut {
			return methodNotAllowed("GET", "PUT")
		}
	default:
		if r.Method != method {
			return methodNotAllowed(method)
		}
	}
	ctx := r.Context()
	pid, err := s.projectKey(ctx, r)
	if err != nil {
		return err
	}
	p, err := s.projectPrincipal(ctx, r, pid)
	if err != nil {
		return err
	}
	return fn(w, r, push.Caller{ProjectID: p.ProjectID, UserID: p.UserID, Role: p.Role})
}

var errOwnerOnly = newError(http.StatusForbidden, "forbidden", "only an owner may do this; a user token may only receive")

func ownerOnly(c push.Caller) error {
	if !c.IsOwner() {
		return errOwnerOnly
	}
	return nil
}

func (s *Server) writeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.writeTimeout)
}

func (s *Server) pushToggle(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	if err := ownerOnly(c); err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		on, err := s.push.Enabled(c.ProjectID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"projectId": c.ProjectID, "pushEnabled": on})
		return nil
	}
	var body struct {
		ProjectID *string `json:"projectId"`
		Enabled   *bool   `json:"enabled"`
	}
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.ProjectID == nil || *body.ProjectID == "" {
		return badField("projectId", "invalid_argument", "projectId is required")
	}
	if body.Enabled == nil {
		return badField("enabled", "invalid_argument", "enabled is required (true or false)")
	}
	if *body.ProjectID != c.ProjectID {
		return &apiError{Status: http.StatusForbidden, Code: "project_mismatch", Message: "projectId must be the project of X-Project-Id", Field: "projectId"}
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	rev, err := s.push.SetEnabled(ctx, c, *body.Enabled)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]any{"projectId": c.ProjectID, "pushEnabled": *body.Enabled})
}

func (s *Server) pushRegister(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	var body struct {
		Token      string `json:"token"`
		DeviceInfo *struct {
			Platform string `json:"platform"`
		} `json:"deviceInfo"`
	}
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if err := required("token", body.Token); err != nil {
		return err
	}
	if body.DeviceInfo == nil {
		return badField("deviceInfo", "invalid_argument", "deviceInfo is required, with platform android, ios or web")
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	dev, rev, err := s.push.Register(ctx, c, body.Token, body.DeviceInfo.Platform)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusCreated, rev, map[string]any{"token": dev.Token, "platform": dev.Platform, "registeredAt": dev.RegisteredAt})
}

func (s *Server) pushUnregister(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	var body struct {
		Token string `json:"token"`
	}
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if err := required("token", body.Token); err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	rev, err := s.push.Unregister(ctx, c, body.Token)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]any{"ok": true})
}

// pushDevices serves GET devices[?userId=]: an owner may name any user of
// the project, anyone else only themselves.
func (s *Server) pushDevices(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	list, err := s.push.DevicesOf(c, r.URL.Query().Get("userId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"devices": list})
	return nil
}

func (s *Server) pushSubscribe(on bool) func(http.ResponseWriter, *http.Request, push.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, c push.Caller) error {
		var body struct {
			Topic string `json:"topic"`
		}
		if err := s.decodeBody(w, r, &body); err != nil {
			return err
		}
		ctx, cancel := s.writeCtx(r)
		defer cancel()
		var rev uint64
		var err error
		if on {
			rev, err = s.push.Subscribe(ctx, c, body.Topic)
		} else {
			rev, err = s.push.Unsubscribe(ctx, c, body.Topic)
		}
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]any{"topic": body.Topic, "subscribed": on})
	}
}

// pushTopics serves GET topics[?userId=], as pushDevices.
func (s *Server) pushTopics(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	list, err := s.push.TopicsOf(c, r.URL.Query().Get("userId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": list})
	return nil
}

// pushProjectTopics serves GET project-topics (owner): the topics someone
// follows with their subscriber counts; "complete" is false when the
// count's bound (push.MaxTopicCountKeys memberships) cut it short.
func (s *Server) pushProjectTopics(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	if err := ownerOnly(c); err != nil {
		return err
	}
	list, complete, err := s.push.ProjectTopics(c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": list, "complete": complete})
	return nil
}

// sendBody is the body of the send and schedule routes.
type sendBody struct {
	Title    *string         `json:"title"`
	Body     string          `json:"body"`
	Data     json.RawMessage `json:"data"`
	Category string          `json:"category"`
	Topic    string          `json:"topic"`
	SendAt   string          `json:"sendAt"`
	Target   *push.Target    `json:"target"`
}

func (b *sendBody) content() (push.Content, error) {
	if b.Title == nil {
		return push.Content{}, badField("title", "invalid_argument", "title is required")
	}
	data, err := push.ParseData(b.Data)
	if err != nil {
		return push.Content{}, err
	}
	return push.Content{Title: *b.Title, Body: b.Body, Data: data, Category: b.Category}, nil
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, c push.Caller, target func(b *sendBody) (push.Target, error)) error {
	if err := ownerOnly(c); err != nil {
		return err
	}
	var body sendBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	t, err := target(&body)
	if err != nil {
		return err
	}
	content, err := body.content()
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	n, rev, err := s.push.Send(ctx, c, t, content)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusAccepted, rev, map[string]any{"notificationId": n.ID, "status": n.Status, "targets": n.Targets})
}

func (s *Server) pushSendProject(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	return s.send(w, r, c, func(*sendBody) (push.Target, error) {
		if r.PathValue("projectId") != c.ProjectID {
			return push.Target{}, &apiError{Status: http.StatusForbidden, Code: "project_mismatch", Message: "the path's projectId must be the project of X-Project-Id", Field: "projectId"}
		}
		return push.Target{Project: true}, nil
	})
}

func (s *Server) pushSendUser(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	return s.send(w, r, c, func(*sendBody) (push.Target, error) {
		return push.Target{UserID: r.PathValue("userId")}, nil
	})
}

func (s *Server) pushSendTopic(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	return s.send(w, r, c, func(b *sendBody) (push.Target, error) {
		if err := push.ValidateTopic(b.Topic); err != nil {
			return push.Target{}, err
		}
		return push.Target{Topic: b.Topic}, nil
	})
}

func (s *Server) pushSchedule(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	var body sendBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	content, err := body.content()
	if err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	sc, rev, err := s.push.Schedule(ctx, c, body.Target, content, body.SendAt)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusCreated, rev, sc.View())
}

// pageParams reads limit (default 20, 1..100) and cursor.
func pageParams(r *http.Request) (int, string, error) {
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" || r.URL.Query().Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return 0, "", badField("limit", "invalid_argument", "limit must be an integer from 1 to 100")
		}
		limit = n
	}
	return limit, r.URL.Query().Get("cursor"), nil
}

func (s *Server) pushScheduled(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	limit, cursor, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := s.push.Schedules(c, limit, cursor)
	if err != nil {
		return err
	}
	views := make([]*push.ScheduleView, len(page.Items))
	for i := range page.Items {
		views[i] = page.Items[i].View()
	}
	writeJSON(w, http.StatusOK, map[string]any{"scheduled": views, "nextCursor": page.NextCursor})
	return nil
}

func (s *Server) pushCancel(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	sc, rev, err := s.push.CancelSchedule(ctx, c, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, sc.View())
}

func (s *Server) pushHistory(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	limit, cursor, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := s.push.History(c, limit, cursor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"notifications": page.Items, "nextCursor": page.NextCursor})
	return nil
}

func (s *Server) pushPrefs(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	if r.Method == http.MethodGet {
		p, err := s.push.Prefs(c)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, p)
		return nil
	}
	var u push.PrefsUpdate
	if err := s.decodeBody(w, r, &u); err != nil {
		return err
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	p, rev, err := s.push.SetPrefs(ctx, c, &u)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, p)
}

func (s *Server) pushCredentials(w http.ResponseWriter, r *http.Request, c push.Caller) error {
	if err := ownerOnly(c); err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		info, err := s.push.Credentials(c)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, info)
		return nil
	}
	raw, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if !json.Valid(raw) {
		return newError(http.StatusBadRequest, "invalid_json", "the request body is not valid JSON")
	}
	ctx, cancel := s.writeCtx(r)
	defer cancel()
	info, rev, err := s.push.SetCredentials(ctx, c, raw)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, info)
}
