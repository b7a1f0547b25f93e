// Package keys is the one owner of the key schema of the replicated document
// tree: every path the domain packages (auth, push, realtime) read or write
// is built, and every such path is taken apart, here, so that no other
// package spells a path string.
//
// The tree holds three kinds of state:
//
//   - User documents at <pid>/<path>: the project's data, as /api/db and
//     realtime name it (Doc, Rel). A client-written path never has a segment
//     starting with "_".
//   - Per-project system state under reserved "_" segments of the project:
//     accounts (<pid>/_users/<uid>), the email index, rules, allowed origins,
//     and push state (devices, topics, preferences, notifications, schedules,
//     the inbox that realtime delivers). IsReserved tells such a path apart.
//   - Cluster-wide state under raftstore.SystemPrefix ("_sys/"): projects,
//     sessions, login tickets, verify tokens, rate-limit counters and the
//     push dispatcher's queues. raftstore keeps its own cluster-internal keys
//     (NodeRecordPath, RemovedPath).
//
// The layout is stored data: every function here must keep producing the
// same bytes as the binaries that wrote the tree (keys_test.go pins them).
package keys

import (
	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

const sep = "/"

// ---- generic ---------------------------------------------------------------

// Under is the prefix of everything below dir: dir + "/".
func Under(dir string) string { return dir + sep }

// Base is the last segment of path: the id of a document listed in its
// directory.
func Base(path string) string { return path[strings.LastIndex(path, sep)+1:] }

// ---- user documents --------------------------------------------------------

// Doc is the key of the user document rel (a client path) of project pid.
func Doc(pid, rel string) string { return pid + sep + rel }

// Rel is path relative to project pid; ok is false when path is not inside
// the project (or is the project's root).
func Rel(pid, path string) (rel string, ok bool) {
	rel, ok = strings.CutPrefix(path, pid+sep)
	if !ok || rel == "" {
		return "", false
	}
	return rel, true
}

// IsReserved reports whether rel (a path relative to a project, or a single
// segment) starts with a reserved "_" segment: system state, not user data.
func IsReserved(rel string) bool { return strings.HasPrefix(rel, "_") }

// ---- auth: cluster-wide ----------------------------------------------------

// ProjectsDir holds every project's record, keyed by project id.
func ProjectsDir() string { return raftstore.SystemPrefix + "/projects" }

// Project is the record of project pid.
func Project(pid string) string { return ProjectsDir() + sep + pid }

// SessionsDir holds every session, keyed by the hash of its token.
func SessionsDir() string { return raftstore.SystemPrefix + "/sessions" }

// Session is the session whose token hashes to tokenHash.
func Session(tokenHash string) string { return SessionsDir() + sep + tokenHash }

// TicketsDir holds the login tickets (second factor pending).
func TicketsDir() string { return raftstore.SystemPrefix + "/tickets" }

// Ticket is the login ticket whose token hashes to tokenHash.
func Ticket(tokenHash string) string { return TicketsDir() + sep + tokenHash }

// VerifyDir holds the verify tokens (password reset and the like).
func VerifyDir() string { return raftstore.SystemPrefix + "/verify" }

// Verify is the verify token that hashes to tokenHash.
func Verify(tokenHash string) string { return VerifyDir() + sep + tokenHash }

// LimitsDir holds the rate-limit counters.
func LimitsDir() string { return raftstore.SystemPrefix + "/limits" }

// Limit is the counter of one bucket: parts (kind, project, email, address…)
// each followed by a NUL byte, hashed with SHA-256.
func Limit(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return LimitsDir() + sep + hex.EncodeToString(h.Sum(nil))
}

// ---- auth: per project -----------------------------------------------------

// UsersDir holds project pid's accounts.
func UsersDir(pid string) string { return pid + "/_users" }

// User is account uid of project pid.
func User(pid, uid string) string { return UsersDir(pid) + sep + uid }

// AccountSessionsDir indexes the live sessions of account uid, oldest first
// (entry names start with the creation time).
func AccountSessionsDir(pid, uid string) string { return pid + "/_sessions/" + uid }

// AccountSession is the index entry name of one session of account uid.
func AccountSession(pid, uid, name string) string { return AccountSessionsDir(pid, uid) + sep + name }

// ParseUser splits an account key "<pid>/_users/<uid>"; ok is false for any
// other key.
func ParseUser(path string) (pid, uid string, ok bool) {
	pid, uid, ok = strings.Cut(path, "/_users/")
	if !ok || pid == "" || strings.Contains(pid, sep) || uid == "" || strings.Contains(uid, sep) {
		return "", "", false
	}
	return pid, uid, true
}

// NormalizeEmail returns the form in which addresses are stored and looked
// up (and hashed by Email): trimmed of surrounding white space, in Unicode
// NFC, lowercased, with the domain in IDNA A-labels ("bücher.example" is
// "xn--bcher-kva.example"), so that one address typed two ways is one
// account. ASCII addresses are only trimmed and lowercased, as they always
// were.
func NormalizeEmail(s string) string {
	s = strings.ToLower(norm.NFC.String(strings.TrimSpace(s)))
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s
	}
	if ascii, err := idna.Lookup.ToASCII(s[at+1:]); err == nil {
		return s[:at+1] + ascii
	}
	return s
}

// Email is project pid's index entry of an address: the SHA-256 of the
// normalized address, so "Ada@x.io " and "ada@x.io" are one entry.
func Email(pid, email string) string {
	sum := sha256.Sum256([]byte(NormalizeEmail(email)))
	return pid + "/_emails/" + hex.EncodeToString(sum[:])
}

// Rules is project pid's access rules.
func Rules(pid string) string { return pid + "/_rules" }

// Origins is project pid's allowed browser origins.
func Origins(pid string) string { return pid + "/_origins" }

// Indexes is project pid's declared query indexes (raftstore maintains
// them, so raftstore owns the path).
func Indexes(pid string) string { return raftstore.IndexesPath(pid) }

// SessionEnds lists the documents whose change can end a session of account
// uid of project pid with token hash tokenHash: the session itself, the
// account (deleted, new session generation, role) and the project's rules.
func SessionEnds(pid, uid, tokenHash string) []string {
	return []string{Session(tokenHash), User(pid, uid), Rules(pid)}
}

// ---- push: per project -----------------------------------------------------

// PushSettings is project pid's push switch.
func PushSettings(pid string) string { return pid + "/_pushcfg" }

// IsPushSettings reports whether path is some project's PushSettings.
func IsPushSettings(path string) bool {
	pid, ok := strings.CutSuffix(path, "/_pushcfg")
	return ok && pid != "" && !strings.Contains(pid, sep)
}

// FCMCredentials is project pid's sealed FCM service account.
func FCMCredentials(pid string) string { return pid + "/_fcm" }

// DeviceTokenHash names a device token in keys: tokens are long and may hold
// characters that keys do not. It is the hex of the first 16 bytes of the
// token's SHA-256.
func DeviceTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// DeviceToken records which user of project pid owns the device token that
// hashes to th (DeviceTokenHash).
func DeviceToken(pid, th string) string { return pid + "/_tokens/" + th }

// AllDevices holds the devices of every user of project pid.
func AllDevices(pid string) string { return pid + "/_devices" }

// DevicesDir holds the devices of user uid of project pid.
func DevicesDir(pid, uid string) string { return AllDevices(pid) + sep + uid }

// Device is the device of user uid whose token hashes to th.
func Device(pid, uid, th string) string { return DevicesDir(pid, uid) + sep + th }

// TopicsRoot holds project pid's topics (TopicDir), one directory each.
func TopicsRoot(pid string) string { return pid + "/_topics" }

// TopicDir holds the users that follow topic, one document per user id.
func TopicDir(pid, topic string) string { return TopicsRoot(pid) + sep + topic }

// TopicMember records that user uid follows topic.
func TopicMember(pid, topic, uid string) string { return TopicDir(pid, topic) + sep + uid }

// UserTopicsDir holds the topics user uid follows, one document per topic.
func UserTopicsDir(pid, uid string) string { return pid + "/_usertopics/" + uid }

// UserTopic records that user uid follows topic (the mirror of TopicMember).
func UserTopic(pid, uid, topic string) string { return UserTopicsDir(pid, uid) + sep + topic }

// PushLock serializes the device and topic changes of user uid.
func PushLock(pid, uid string) string { return pid + "/_pushlock/" + uid }

// Prefs is the notification preferences of user uid.
func Prefs(pid, uid string) string { return pid + "/_prefs/" + uid }

// NotificationsDir holds project pid's notifications.
func NotificationsDir(pid string) string { return pid + "/_notifications" }

// Notification is notification nid of project pid.
func Notification(pid, nid string) string { return NotificationsDir(pid) + sep + nid }

// SchedulesDir holds project pid's scheduled notifications.
func SchedulesDir(pid string) string { return pid + "/_schedules" }

// Schedule is schedule sid of project pid.
func Schedule(pid, sid string) string { return SchedulesDir(pid) + sep + sid }

// MySchedulesDir indexes the schedules user uid created.
func MySchedulesDir(pid, uid string) string { return pid + "/_myschedules/" + uid }

// MySchedule is the index entry of schedule sid created by user uid.
func MySchedule(pid, uid, sid string) string { return MySchedulesDir(pid, uid) + sep + sid }

// InboxDir holds what was delivered to user uid: their history, and (because
// the realtime hub watches it) the socket channel.
func InboxDir(pid, uid string) string { return pid + "/_notify/" + uid }

// Inbox is notification nid as delivered to user uid.
func Inbox(pid, uid, nid string) string { return InboxDir(pid, uid) + sep + nid }

// ParseInbox splits an inbox entry "<pid>/_notify/<uid>/<nid>"; ok is false
// for any other key.
func ParseInbox(path string) (pid, uid, nid string, ok bool) {
	pid, rest, ok := strings.Cut(path, "/_notify/")
	if !ok || pid == "" || strings.Contains(pid, sep) {
		return "", "", "", false
	}
	uid, nid, ok = strings.Cut(rest, sep)
	if !ok || uid == "" || nid == "" || strings.Contains(nid, sep) {
		return "", "", "", false
	}
	return pid, uid, nid, true
}

// ---- push: cluster-wide ----------------------------------------------------

// pushDir holds the push dispatcher's cluster-wide queues.
func pushDir() string { return raftstore.SystemPrefix + "/push" }

// InPushQueues reports whether path is in the dispatcher's queues (a job or
// a due entry).
func InPushQueues(path string) bool { return strings.HasPrefix(path, Under(pushDir())) }

// PushJobsDir holds the dispatcher's jobs, keyed so they sort by due time.
func PushJobsDir() string { return pushDir() + "/jobs" }

// PushJob is job jid.
func PushJob(jid string) string { return PushJobsDir() + sep + jid }

// PushDueDir indexes the schedules by due time.
func PushDueDir() string { return pushDir() + "/due" }

// PushDueKey names a schedule in PushDueDir so that the index sorts by due
// time, then by project and schedule: "<unix ns, 20 digits>.<pid>.<sid>".
func PushDueKey(at time.Time, pid, sid string) string {
	return fmt.Sprintf("%020d.%s.%s", at.UnixNano(), pid, sid)
}

// PushDue is the due entry named key (PushDueKey).
func PushDue(key string) string { return PushDueDir() + sep + key }

// ---- accounts: email codes ----

// EmailCodesDir holds the pending email codes (verification, password
// reset, sign-in, change of address), one per project, purpose and subject.
func EmailCodesDir() string { return raftstore.SystemPrefix + "/emailcodes" }

// EmailCode is the pending code of purpose for subject (a normalized address,
// or an account id) in project pid: the parts hashed like Limit's, so that an
// address never appears in a key.
func EmailCode(pid, purpose, subject string) string {
	h := sha256.New()
	for _, p := range []string{pid, purpose, subject} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return EmailCodesDir() + sep + hex.EncodeToString(h.Sum(nil))
}

// EmailLinksDir holds the link tokens sent with email codes, keyed by the
// hash of the token; each names its code.
func EmailLinksDir() string { return raftstore.SystemPrefix + "/emaillinks" }

// EmailLink is the link token that hashes to tokenHash.
func EmailLink(tokenHash string) string { return EmailLinksDir() + sep + tokenHash }

// AccountPurgesDir holds the accounts deleted whose data is still being
// removed (chunk by chunk, after the account itself).
func AccountPurgesDir() string { return raftstore.SystemPrefix + "/purges" }

// AccountPurge is the pending purge of account uid of project pid.
func AccountPurge(pid, uid string) string { return AccountPurgesDir() + sep + pid + "." + uid }

// AuthSettings is project pid's sign-in settings (anonymous sign-in, the
// URL the links in emails open).
func AuthSettings(pid string) string { return pid + "/_authsettings" }

// UserData is the user documents' directory of user uid (the client path
// users/<uid>): deleting an account deletes it and everything below it.
func UserData(pid, uid string) string { return Doc(pid, "users/"+uid) }

// ---- accounts: audit ----

// AuditDir holds project pid's security audit log, one document per event,
// named by AuditKey so that the log sorts by time.
func AuditDir(pid string) string { return pid + "/_audit" }

// AuditKey names an audit event: "<unix ns, 20 digits>-<rnd>", rnd a short
// random hex string the proposer drew so that events of one nanosecond
// stay apart.
func AuditKey(at time.Time, rnd string) string { return fmt.Sprintf("%020d-%s", at.UnixNano(), rnd) }

// Audit is the audit event named id (AuditKey) of project pid.
func Audit(pid, id string) string { return AuditDir(pid) + sep + id }

// ---- accounts: mail ----

// MailOutboxDir holds the queued emails of every project (mail.Record), in
// the order they were queued: the leader's sender works through it.
func MailOutboxDir() string { return raftstore.SystemPrefix + "/mail/outbox" }

// MailOutbox is the queued email id, queued at `at`: "<unix ns, 20
// digits>-<id>", so that the outbox lists oldest first.
func MailOutbox(at time.Time, id string) string {
	return fmt.Sprintf("%s/%020d-%s", MailOutboxDir(), at.UnixNano(), id)
}

// SMTP is project pid's own SMTP server (password sealed).
func SMTP(pid string) string { return pid + "/_smtp" }

// MailTemplates holds project pid's customized email templates, one
// document per kind, so that two owners changing two kinds at once do
// not undo each other.
func MailTemplates(pid string) string { return pid + "/_mailtemplates" }

// MailTemplate is project pid's template of kind.
func MailTemplate(pid, kind string) string { return MailTemplates(pid) + sep + kind }

// ---- accounts: users and sessions ----

// DisabledDir holds a marker per disabled account of project pid.
func DisabledDir(pid string) string { return pid + "/_disabled" }

// AccountDisabled exists while account uid of project pid is disabled: the
// commit that opens a session is conditioned on its absence, so a disable
// racing a sign-in wins wherever the two meet in the log.
func AccountDisabled(pid, uid string) string { return DisabledDir(pid) + sep + uid }

// ---- accounts: api keys ----

// APIKeysDir holds project pid's named API keys, one document per key id.
func APIKeysDir(pid string) string { return pid + "/_keys" }

// APIKey is the named API key id of project pid.
func APIKey(pid, id string) string { return APIKeysDir(pid) + sep + id }

// ---- accounts: oauth ----

// OAuthProvidersDir holds project pid's OAuth / OIDC providers, one
// document per provider name.
func OAuthProvidersDir(pid string) string { return pid + "/_oauth" }

// OAuthProvider is project pid's configuration of provider (client secret
// sealed).
func OAuthProvider(pid, provider string) string { return OAuthProvidersDir(pid) + sep + provider }

// Identity is project pid's index entry of the provider's subject: which
// account the identity signs in to. The subject is hashed (SHA-256): it is
// the provider's, of any length and alphabet.
func Identity(pid, provider, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return pid + "/_identities/" + provider + sep + hex.EncodeToString(sum[:])
}

// oauthDir holds the cluster-wide records of OAuth flows in progress.
func oauthDir() string { return raftstore.SystemPrefix + "/oauth" }

// OAuthStatesDir holds the states of sign-ins sent to a provider, keyed by
// the hash of the state parameter (the callback may reach any node).
func OAuthStatesDir() string { return oauthDir() + "/states" }

// OAuthState is the state whose parameter hashes to stateHash.
func OAuthState(stateHash string) string { return OAuthStatesDir() + sep + stateHash }

// OAuthCodesDir holds the one-time codes a callback hands to the app,
// keyed by the hash of the code.
func OAuthCodesDir() string { return oauthDir() + "/codes" }

// OAuthCode is the one-time code that hashes to codeHash.
func OAuthCode(codeHash string) string { return OAuthCodesDir() + sep + codeHash }

// ---- triggers ----------------------------------------------------------------

// TriggersDir holds a project's trigger definitions, one per name.
func TriggersDir(pid string) string { return pid + "/_triggers" }

// Trigger is the definition of trigger name.
func Trigger(pid, name string) string { return TriggersDir(pid) + sep + name }

// TriggerStates holds the leader's committed progress of each trigger.
func TriggerStates(pid string) string { return pid + "/_triggerstate" }

// TriggerState is trigger name's progress: its cursor and counts.
func TriggerState(pid, name string) string { return TriggerStates(pid) + sep + name }

// TriggerQueueDir holds trigger name's parked events: those whose delivery
// failed once and waits for a retry, and those queued behind them on the
// same document path. Entry keys are TriggerQueueKey.
func TriggerQueueDir(pid, name string) string { return pid + "/_triggerq/" + name }

// TriggerQueueKey orders parked events by document path, then revision:
// 16 hex digits of the path's SHA-256, a dash, the revision in 20 digits.
func TriggerQueueKey(path string, rev uint64) string {
	return TriggerPathHash(path) + "-" + fmt.Sprintf("%020d", rev)
}

// TriggerPathHash is the first 16 hex digits of the SHA-256 of a document
// path: the lane a parked event belongs to.
func TriggerPathHash(path string) string {
	h := sha256.Sum256([]byte(path))
	return hex.EncodeToString(h[:8])
}

// TriggerDeadDir holds trigger name's dead letters: events given up on.
// Entry keys are TriggerDeadKey.
func TriggerDeadDir(pid, name string) string { return pid + "/_triggerdead/" + name }

// TriggerDeadKey orders dead letters by revision, then path.
func TriggerDeadKey(path string, rev uint64) string {
	return fmt.Sprintf("%020d", rev) + "-" + TriggerPathHash(path)
}

// TriggerOrigin is the marker a trigger's derived write commits in its own
// entry, {"depth":n,...}: every change of that revision was made by a
// trigger at depth n (the loop limit counts it).
func TriggerOrigin(pid string) string { return pid + "/_triggerorigin" }

// TriggerIndexDir lists every trigger of every project, for the leader's
// runner: entries are TriggerIndex.
func TriggerIndexDir() string { return raftstore.SystemPrefix + "/triggers" }

// TriggerIndex is the index entry of trigger name of project pid.
func TriggerIndex(pid, name string) string { return TriggerIndexDir() + sep + pid + "." + name }

// ParseTriggerIndex takes a TriggerIndex path apart.
func ParseTriggerIndex(path string) (pid, name string, ok bool) {
	rest, ok := strings.CutPrefix(path, Under(TriggerIndexDir()))
	if !ok {
		return "", "", false
	}
	pid, name, ok = strings.Cut(rest, ".")
	return pid, name, ok && pid != "" && name != ""
}

// ParseTrigger takes a Trigger path apart.
func ParseTrigger(path string) (pid, name string, ok bool) {
	pid, rest, ok := strings.Cut(path, sep)
	if !ok {
		return "", "", false
	}
	name, ok = strings.CutPrefix(rest, "_triggers"+sep)
	return pid, name, ok && name != "" && !strings.Contains(name, sep)
}
