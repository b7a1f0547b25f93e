package keys_test

import (
	"slices"
	"testing"
	"time"

	"github.com/edgebase/edgebase/keys"
)

// TestLayout pins every key to the bytes earlier binaries wrote: a change
// here is a change of the stored layout and strands existing data.
func TestLayout(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		// generic
		{"Under", keys.Under("p1/_users"), "p1/_users/"},
		{"Base", keys.Base("_sys/push/jobs/j1"), "j1"},
		{"Base/no slash", keys.Base("j1"), "j1"},
		{"Doc", keys.Doc("p1", "posts/a"), "p1/posts/a"},

		// auth, cluster-wide
		{"Project", keys.Project("p1"), "_sys/projects/p1"},
		{"ProjectsDir", keys.ProjectsDir(), "_sys/projects"},
		{"SessionsDir", keys.SessionsDir(), "_sys/sessions"},
		{"Session", keys.Session("abc"), "_sys/sessions/abc"},
		{"TicketsDir", keys.TicketsDir(), "_sys/tickets"},
		{"Ticket", keys.Ticket("abc"), "_sys/tickets/abc"},
		{"VerifyDir", keys.VerifyDir(), "_sys/verify"},
		{"Verify", keys.Verify("abc"), "_sys/verify/abc"},
		{"LimitsDir", keys.LimitsDir(), "_sys/limits"},
		{"Limit", keys.Limit("password", "p1", "ada@x.io"),
			"_sys/limits/a58540adc7eb887c9e77beffd27a1b9157b488f9d863b057b18449cfcba3282a"},
		{"Limit/4 parts", keys.Limit("password+addr", "p1", "ada@x.io", "203.0.113.7"),
			"_sys/limits/11e1794948209de439af79a32bf0f0e117b15413cadc32a4ac6782d249e04f27"},
		{"Limit/none", keys.Limit(),
			"_sys/limits/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},

		// auth, per project
		{"UsersDir", keys.UsersDir("p1"), "p1/_users"},
		{"User", keys.User("p1", "u1"), "p1/_users/u1"},
		{"NormalizeEmail", keys.NormalizeEmail("  Ada@X.IO\t"), "ada@x.io"},
		{"Email", keys.Email("p1", "ada@x.io"),
			"p1/_emails/52c3910310491b7eecfd1f3b45bc324b273d8cf9bb8a524cf75b972752d354ff"},
		{"Email/normalizes", keys.Email("p1", " Ada@X.io "),
			"p1/_emails/52c3910310491b7eecfd1f3b45bc324b273d8cf9bb8a524cf75b972752d354ff"},
		{"Rules", keys.Rules("p1"), "p1/_rules"},
		{"Origins", keys.Origins("p1"), "p1/_origins"},
		{"Indexes", keys.Indexes("p1"), "p1/_indexes"},

		// push, per project
		{"PushSettings", keys.PushSettings("p1"), "p1/_pushcfg"},
		{"FCMCredentials", keys.FCMCredentials("p1"), "p1/_fcm"},
		{"DeviceTokenHash", keys.DeviceTokenHash("fcm-token:abc"), "4b23899695ea1f7b74058b9e364b719e"},
		{"DeviceToken", keys.DeviceToken("p1", "th"), "p1/_tokens/th"},
		{"AllDevices", keys.AllDevices("p1"), "p1/_devices"},
		{"DevicesDir", keys.DevicesDir("p1", "u1"), "p1/_devices/u1"},
		{"Device", keys.Device("p1", "u1", "th"), "p1/_devices/u1/th"},
		{"TopicDir", keys.TopicDir("p1", "news"), "p1/_topics/news"},
		{"TopicMember", keys.TopicMember("p1", "news", "u1"), "p1/_topics/news/u1"},
		{"UserTopicsDir", keys.UserTopicsDir("p1", "u1"), "p1/_usertopics/u1"},
		{"UserTopic", keys.UserTopic("p1", "u1", "news"), "p1/_usertopics/u1/news"},
		{"PushLock", keys.PushLock("p1", "u1"), "p1/_pushlock/u1"},
		{"Prefs", keys.Prefs("p1", "u1"), "p1/_prefs/u1"},
		{"NotificationsDir", keys.NotificationsDir("p1"), "p1/_notifications"},
		{"Notification", keys.Notification("p1", "n1"), "p1/_notifications/n1"},
		{"SchedulesDir", keys.SchedulesDir("p1"), "p1/_schedules"},
		{"Schedule", keys.Schedule("p1", "s1"), "p1/_schedules/s1"},
		{"MySchedulesDir", keys.MySchedulesDir("p1", "u1"), "p1/_myschedules/u1"},
		{"MySchedule", keys.MySchedule("p1", "u1", "s1"), "p1/_myschedules/u1/s1"},
		{"InboxDir", keys.InboxDir("p1", "u1"), "p1/_notify/u1"},
		{"Inbox", keys.Inbox("p1", "u1", "n1"), "p1/_notify/u1/n1"},

		// push, cluster-wide
		{"PushJobsDir", keys.PushJobsDir(), "_sys/push/jobs"},
		{"PushJob", keys.PushJob("j1"), "_sys/push/jobs/j1"},
		{"PushDueDir", keys.PushDueDir(), "_sys/push/due"},
		{"PushDueKey", keys.PushDueKey(time.Unix(0, 1700000000123456789), "p1", "s1"), "01700000000123456789.p1.s1"},
		{"PushDueKey/epoch", keys.PushDueKey(time.Unix(0, 5), "p1", "s1"), "00000000000000000005.p1.s1"},
		{"PushDue", keys.PushDue("k"), "_sys/push/due/k"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestSessionEnds(t *testing.T) {
	got := keys.SessionEnds("p1", "u1", "abc")
	want := []string{"_sys/sessions/abc", "p1/_users/u1", "p1/_rules"}
	if !slices.Equal(got, want) {
		t.Fatalf("SessionEnds = %q, want %q", got, want)
	}
}

func TestRel(t *testing.T) {
	for _, c := range []struct {
		pid, path, rel string
		ok             bool
	}{
		{"p1", "p1/posts/a", "posts/a", true},
		{"p1", "p1/_users/u1", "_users/u1", true},
		{"p1", "p1/", "", false},
		{"p1", "p1", "", false},
		{"p1", "p10/posts", "", false},
		{"p1", "p2/p1/posts", "", false},
		{"p1", "_sys/projects/p1", "", false},
	} {
		rel, ok := keys.Rel(c.pid, c.path)
		if rel != c.rel || ok != c.ok {
			t.Errorf("Rel(%q, %q) = %q, %v; want %q, %v", c.pid, c.path, rel, ok, c.rel, c.ok)
		}
	}
}

func TestIsReserved(t *testing.T) {
	for rel, want := range map[string]bool{
		"_users/u1":  true,
		"_rules":     true,
		"_":          true,
		"posts/a":    false,
		"posts/_x":   false, // only the first segment counts
		"":           false,
		"u1":         false,
		"_underline": true,
	} {
		if got := keys.IsReserved(rel); got != want {
			t.Errorf("IsReserved(%q) = %v, want %v", rel, got, want)
		}
	}
}

func TestParseUser(t *testing.T) {
	for _, c := range []struct {
		path, pid, uid string
		ok             bool
	}{
		{"p1/_users/u1", "p1", "u1", true},
		{keys.User("p2", "abc"), "p2", "abc", true},
		{"p1/_users/", "", "", false},
		{"/_users/u1", "", "", false},
		{"p1/_users/u1/x", "", "", false},
		{"a/p1/_users/u1", "", "", false},
		{"p1/_users", "", "", false},
		{"p1/users/u1", "", "", false},
		{"p1/_rules", "", "", false},
		{"_sys/sessions/abc", "", "", false},
	} {
		pid, uid, ok := keys.ParseUser(c.path)
		if pid != c.pid || uid != c.uid || ok != c.ok {
			t.Errorf("ParseUser(%q) = %q, %q, %v; want %q, %q, %v", c.path, pid, uid, ok, c.pid, c.uid, c.ok)
		}
	}
}

func TestParseInbox(t *testing.T) {
	for _, c := range []struct {
		path, pid, uid, nid string
		ok                  bool
	}{
		{"p1/_notify/u1/n1", "p1", "u1", "n1", true},
		{keys.Inbox("p2", "u2", "n2"), "p2", "u2", "n2", true},
		{"p1/_notify/u1", "", "", "", false},
		{"p1/_notify/u1/", "", "", "", false},
		{"p1/_notify//n1", "", "", "", false},
		{"/_notify/u1/n1", "", "", "", false},
		{"p1/_notify/u1/n1/x", "", "", "", false},
		{"a/p1/_notify/u1/n1", "", "", "", false},
		{"p1/_notifications/n1", "", "", "", false},
		{"p1/notify/u1/n1", "", "", "", false},
	} {
		pid, uid, nid, ok := keys.ParseInbox(c.path)
		if pid != c.pid || uid != c.uid || nid != c.nid || ok != c.ok {
			t.Errorf("ParseInbox(%q) = %q, %q, %q, %v; want %q, %q, %q, %v",
				c.path, pid, uid, nid, ok, c.pid, c.uid, c.nid, c.ok)
		}
	}
}

func TestIsPushSettings(t *testing.T) {
	for path, want := range map[string]bool{
		"p1/_pushcfg":         true,
		keys.PushSettings(""): false,
		"_pushcfg":            false,
		"a/p1/_pushcfg":       false,
		"p1/_pushcfg/x":       false,
		"p1/_pushcfgx":        false,
		"p1/_fcm":             false,
	} {
		if got := keys.IsPushSettings(path); got != want {
			t.Errorf("IsPushSettings(%q) = %v, want %v", path, got, want)
		}
	}
	if !keys.IsPushSettings(keys.PushSettings("p9")) {
		t.Errorf("IsPushSettings(PushSettings(p9)) = false")
	}
}

func TestInPushQueues(t *testing.T) {
	for path, want := range map[string]bool{
		keys.PushJob("j1"):    true,
		keys.PushDue("k"):     true,
		"_sys/push/other":     true,
		"_sys/push":           false,
		"_sys/pushx/j":        false,
		"_sys/sessions/abc":   false,
		"p1/_sys/push/jobs/j": false,
	} {
		if got := keys.InPushQueues(path); got != want {
			t.Errorf("InPushQueues(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestAccountSessionKeys(t *testing.T) {
	if got, want := keys.AccountSessionsDir("p1", "u1"), "p1/_sessions/u1"; got != want {
		t.Errorf("AccountSessionsDir = %q, want %q", got, want)
	}
	if got, want := keys.AccountSession("p1", "u1", "00000000000000000001-ab"), "p1/_sessions/u1/00000000000000000001-ab"; got != want {
		t.Errorf("AccountSession = %q, want %q", got, want)
	}
}

// TestEmailCodeKeys pins the layout of the email-code, link, purge, auth
// settings and user-data keys (accounts: email codes).
func TestEmailCodeKeys(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"EmailCodesDir", keys.EmailCodesDir(), "_sys/emailcodes"},
		{"EmailCode", keys.EmailCode("p1", "verify", "ada@x.io"),
			"_sys/emailcodes/12080ba5c81a32bb0dfd96c083deaabafc6599ac5db706b82348344ecc369262"},
		{"EmailLinksDir", keys.EmailLinksDir(), "_sys/emaillinks"},
		{"EmailLink", keys.EmailLink("abc"), "_sys/emaillinks/abc"},
		{"AccountPurgesDir", keys.AccountPurgesDir(), "_sys/purges"},
		{"AccountPurge", keys.AccountPurge("p1", "u1"), "_sys/purges/p1.u1"},
		{"AuthSettings", keys.AuthSettings("p1"), "p1/_authsettings"},
		{"UserData", keys.UserData("p1", "u1"), "p1/users/u1"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	// The subject is one part: moving a byte between parts is another key.
	if keys.EmailCode("p1", "verify", "ada@x.io") == keys.EmailCode("p1", "verif", "yada@x.io") {
		t.Error("EmailCode parts are not separated")
	}
}

// TestAuditKeys pins the layout of the audit log (accounts: audit): the
// names sort by time, and the time is the first 20 digits.
func TestAuditKeys(t *testing.T) {
	at := time.Unix(1700000000, 123)
	for _, c := range []struct{ name, got, want string }{
		{"AuditDir", keys.AuditDir("p1"), "p1/_audit"},
		{"AuditKey", keys.AuditKey(at, "0a1b2c3d"), "01700000000000000123-0a1b2c3d"},
		{"Audit", keys.Audit("p1", "01700000000000000123-0a1b2c3d"), "p1/_audit/01700000000000000123-0a1b2c3d"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if a, b := keys.AuditKey(time.Unix(9, 0), "ffffffff"), keys.AuditKey(time.Unix(10, 0), "00000000"); a >= b {
		t.Errorf("AuditKey does not sort by time: %q >= %q", a, b)
	}
	if !keys.IsReserved("_audit/x") {
		t.Error("the audit log is not reserved state")
	}
}

// TestAccountsAdminKeys pins the layout of the disabled-account markers and
// the named API keys (accounts: users and sessions, api keys).
func TestAccountsAdminKeys(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"DisabledDir", keys.DisabledDir("p1"), "p1/_disabled"},
		{"AccountDisabled", keys.AccountDisabled("p1", "u1"), "p1/_disabled/u1"},
		{"APIKeysDir", keys.APIKeysDir("p1"), "p1/_keys"},
		{"APIKey", keys.APIKey("p1", "k1"), "p1/_keys/k1"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	for _, rel := range []string{"_disabled/u1", "_keys/k1"} {
		if !keys.IsReserved(rel) {
			t.Errorf("%s is not reserved state", rel)
		}
	}
}

// TestOAuthKeys pins the layout of OAuth / OIDC state (accounts: oauth).
func TestOAuthKeys(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"OAuthProvidersDir", keys.OAuthProvidersDir("p1"), "p1/_oauth"},
		{"OAuthProvider", keys.OAuthProvider("p1", "google"), "p1/_oauth/google"},
		{"Identity", keys.Identity("p1", "github", "42"), "p1/_identities/github/73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049"},
		{"OAuthStatesDir", keys.OAuthStatesDir(), "_sys/oauth/states"},
		{"OAuthState", keys.OAuthState("ab"), "_sys/oauth/states/ab"},
		{"OAuthCodesDir", keys.OAuthCodesDir(), "_sys/oauth/codes"},
		{"OAuthCode", keys.OAuthCode("cd"), "_sys/oauth/codes/cd"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !keys.IsReserved("_oauth/google") || !keys.IsReserved("_identities/github/x") {
		t.Error("OAuth state is not reserved")
	}
}

// TestMailKeys pins the layout of the email outbox and settings (accounts:
// mail): queued records name their queue time so the outbox lists oldest
// first.
func TestMailKeys(t *testing.T) {
	at := time.Unix(1700000000, 5)
	for _, c := range []struct{ name, got, want string }{
		{"MailOutboxDir", keys.MailOutboxDir(), "_sys/mail/outbox"},
		{"MailOutbox", keys.MailOutbox(at, "m1"), "_sys/mail/outbox/01700000000000000005-m1"},
		{"SMTP", keys.SMTP("p1"), "p1/_smtp"},
		{"MailTemplates", keys.MailTemplates("p1"), "p1/_mailtemplates"},
		{"MailTemplate", keys.MailTemplate("p1", "sign-in-code"), "p1/_mailtemplates/sign-in-code"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if keys.MailOutbox(at, "z") >= keys.MailOutbox(at.Add(time.Nanosecond), "a") {
		t.Error("outbox keys do not sort by queue time")
	}
	if !keys.IsReserved("_smtp") || !keys.IsReserved("_mailtemplates") {
		t.Error("mail settings are not reserved")
	}
}

func TestTriggerKeys(t *testing.T) {
	h := keys.TriggerPathHash("p1/orders/o1")
	for _, c := range []struct{ name, got, want string }{
		{"TriggersDir", keys.TriggersDir("p1"), "p1/_triggers"},
		{"Trigger", keys.Trigger("p1", "t1"), "p1/_triggers/t1"},
		{"TriggerState", keys.TriggerState("p1", "t1"), "p1/_triggerstate/t1"},
		{"TriggerQueueDir", keys.TriggerQueueDir("p1", "t1"), "p1/_triggerq/t1"},
		{"TriggerQueueKey", keys.TriggerQueueKey("p1/orders/o1", 42), h + "-00000000000000000042"},
		{"TriggerDeadDir", keys.TriggerDeadDir("p1", "t1"), "p1/_triggerdead/t1"},
		{"TriggerDeadKey", keys.TriggerDeadKey("p1/orders/o1", 42), "00000000000000000042-" + h},
		{"TriggerOrigin", keys.TriggerOrigin("p1"), "p1/_triggerorigin"},
		{"TriggerIndexDir", keys.TriggerIndexDir(), "_sys/triggers"},
		{"TriggerIndex", keys.TriggerIndex("p1", "t1"), "_sys/triggers/p1.t1"},
		{"TriggerPathHash", h, "4186c61e78de69da"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if keys.TriggerQueueKey("p1/a", 9) >= keys.TriggerQueueKey("p1/a", 10) {
		t.Error("queue keys of one path do not sort by revision")
	}
	if keys.TriggerDeadKey("p1/z", 9) >= keys.TriggerDeadKey("p1/a", 10) {
		t.Error("dead keys do not sort by revision")
	}
	if pid, name, ok := keys.ParseTriggerIndex(keys.TriggerIndex("p1", "t-1")); !ok || pid != "p1" || name != "t-1" {
		t.Errorf("ParseTriggerIndex = %q %q %v", pid, name, ok)
	}
	if pid, name, ok := keys.ParseTrigger(keys.Trigger("p1", "t1")); !ok || pid != "p1" || name != "t1" {
		t.Errorf("ParseTrigger = %q %q %v", pid, name, ok)
	}
	for _, p := range []string{"_sys/triggers", "_sys/triggers/p1", "_sys/triggers/.t", "p1/_triggerstate/t1"} {
		if _, _, ok := keys.ParseTriggerIndex(p); ok {
			t.Errorf("ParseTriggerIndex(%q) ok", p)
		}
	}
	for _, p := range []string{"p1/_triggers", "p1/_triggers/", "p1/_triggers/a/b", "p1/triggers/a", "p1/_triggerq/t1"} {
		if _, _, ok := keys.ParseTrigger(p); ok {
			t.Errorf("ParseTrigger(%q) ok", p)
		}
	}
}
