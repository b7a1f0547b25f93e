package push

import (
	"sort"
	"strings"

	"github.com/edgebase/edgebase/keys"
)

// Owner reads of push state (the admin console): another user's devices and
// topics, and the project's topics with their subscriber counts.

// MaxTopicCountKeys bounds the work of ProjectTopics: it reads at most this
// many topic membership keys (keys only, no values) per call.
const MaxTopicCountKeys = 100_000

// TopicCount is a topic of a project and how many accounts follow it.
type TopicCount struct {
	Topic       string `json:"topic"`
	Subscribers int    `json:"subscribers"`
}

// subject is the account whose devices or topics c reads: c's own when uid
// is "" or c's id; another account only for an owner (ErrForbidden
// otherwise), and it must exist (ErrNotFound, field userId).
func (s *Service) subject(c Caller, uid string) (Caller, error) {
	if uid == "" || uid == c.UserID {
		return c, nil
	}
	if !c.IsOwner() {
		return Caller{}, withMsg(ErrForbidden, "only an owner may read another user's push state", "userId")
	}
	if strings.ContainsAny(uid, "/\x00") || keys.IsReserved(uid) || len(uid) > 200 {
		return Caller{}, withMsg(ErrNotFound, "no account of this project has this id", "userId")
	}
	u, err := s.store.Get(keys.User(c.ProjectID, uid))
	if err != nil {
		return Caller{}, err
	}
	if u == nil {
		return Caller{}, withMsg(ErrNotFound, "no account of this project has this id", "userId")
	}
	return Caller{ProjectID: c.ProjectID, UserID: uid, Role: "user"}, nil
}

// DevicesOf lists the devices of account uid (Devices for "" or the
// caller's own id); an owner may name any account of the project.
func (s *Service) DevicesOf(c Caller, uid string) ([]Device, error) {
	sub, err := s.subject(c, uid)
	if err != nil {
		return nil, err
	}
	return s.Devices(sub)
}

// TopicsOf lists the topics account uid follows (Topics for "" or the
// caller's own id); an owner may name any account of the project.
func (s *Service) TopicsOf(c Caller, uid string) ([]string, error) {
	sub, err := s.subject(c, uid)
	if err != nil {
		return nil, err
	}
	return s.Topics(sub)
}

// ProjectTopics lists the project's topics that someone follows, with the
// number of accounts that follow each, by name, for an owner. It reads the topics'
// membership keys only, at most MaxTopicCountKeys of them: complete is
// false when that bound cut the count short (the topics past it are
// missing and the last one's count may be low).
func (s *Service) ProjectTopics(c Caller) ([]TopicCount, bool, error) {
	if err := ownerOnly(c, "list the project's topics"); err != nil {
		return nil, false, err
	}
	groups, complete, err := s.store.CountByChild(keys.TopicsRoot(c.ProjectID), MaxTopicCountKeys)
	if err != nil {
		return nil, false, err
	}
	out := make([]TopicCount, 0, len(groups))
	for _, g := range groups {
		out = append(out, TopicCount{Topic: g.Name, Subscribers: g.Count})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out, complete, nil
}
