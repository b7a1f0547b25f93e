package fcmfake

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var typicalBody = []byte(`{"message":{"data":{"k":"v","notification_id":"0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"},"notification":{"title":"Hello there","body":"You have a new message"},"android":{"priority":"high"},"apns":{"headers":{"apns-priority":"10"},"payload":{"aps":{"sound":"default"}}},"token":"fGq3kK2sT0eZ_abcdefghijklmnopqrstuvwxyz0123456789:APA91bHxyz-0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop"}}`)

// reference decodes a body with encoding/json, for comparison.
func reference(t testing.TB, body []byte) (Delivery, bool) {
	t.Helper()
	var req struct {
		ValidateOnly bool `json:"validate_only"`
		Message      struct {
			Token        string            `json:"token"`
			Data         map[string]string `json:"data"`
			Notification struct {
				Title string `json:"title"`
				Body  string `json:"body"`
				Image string `json:"image"`
			} `json:"notification"`
			Android    json.RawMessage `json:"android"`
			APNS       json.RawMessage `json:"apns"`
			Webpush    json.RawMessage `json:"webpush"`
			FCMOptions json.RawMessage `json:"fcm_options"`
			FCMCamel   json.RawMessage `json:"fcmOptions"`
		} `json:"message"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("reference decode: %v", err)
	}
	m := req.Message
	if m.FCMCamel != nil && !bytes.Equal(m.FCMCamel, []byte("null")) {
		m.FCMOptions = m.FCMCamel
	}
	return Delivery{Token: m.Token, Title: m.Notification.Title, Body: m.Notification.Body, Image: m.Notification.Image,
		Data: m.Data, Android: m.Android, APNS: m.APNS, Webpush: m.Webpush, FCMOptions: m.FCMOptions}, req.ValidateOnly
}

func TestParseMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	bodies := []string{
		string(typicalBody),
		"{ \"validate_only\" : true ,\n \"message\" :\t{\n  \"token\" : \"t\\u0031\" ,\"data\":{ \"a\\u0062\" : \"x\\\"y\\\\z\" , \"e\":\"\" },\n" +
			" \"notification\" : { \"title\" : \"He said \\\"hi\\\"\\n\\u00e9\\ud83d\\ude00\", \"body\":\"caf\u00e9 \u2603\", \"image\" : null },\n" +
			" \"android\" : {\"x\":[\"}\",{\"y\":\"]\"},[],{}],\"n\":-1.5e3,\"b\":true,\"z\":null} , \"webpush\":{} ,\"fcm_options\":{\"analytics_label\":\"l\"} } }\n",
		`{"message":{"token":"only"}}`,
		`{"message":{"token":"t","data":{}}}`,
		`{"mess\u0061ge":{"tok\u0065n":"escaped-keys"}}`,
	}
	for _, b := range bodies {
		pm, bad := parseSendRequest([]byte(b))
		if bad != nil {
			t.Fatalf("%s: %s", b, bad.message)
		}
		got := pm.delivery()
		want, vo := reference(t, []byte(b))
		if pm.validateOnly != vo {
			t.Errorf("%s: validateOnly %v", b, pm.validateOnly)
		}
		if want.Data == nil && got.Data != nil && len(got.Data) == 0 {
			want.Data = map[string]string{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", b, got, want)
		}
	}
	// Records never alias the (pooled) body buffer.
	body := bytes.Clone(typicalBody)
	pm, _ := parseSendRequest(body)
	d := pm.delivery()
	for i := range body {
		body[i] = 'X'
	}
	want, _ := reference(t, typicalBody)
	if !reflect.DeepEqual(d, want) || pm.token != want.Token {
		t.Errorf("delivery aliases the body: %#v", d)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, b := range []string{
		``, `null`, `[]`, `"x"`, `{"message":{"token":"t"}`, `{"message":{"token":"t"}} x`,
		`{"message":[]}`, `{"message":"t"}`, `{"message":{"token":"t"},"validate_only":"yes"}`,
		`{"message":{"token":["t"]}}`, `{"message":{"token":"t","data":{"a":null}}}`, `{"message":{"token":"t","data":{"a":{"b":"c"}}}}`,
		`{"message":{"token":"t","notification":"x"}}`, `{"message":{"token":"t","notification":{"title":1}}}`,
		`{"message":{"token":"t","webpush":[1]}}`, `{"message":{"token":"t","apns":true}}`,
		`{"message":{"condition":"'a' in topics","topic":"b"}}`, `{"message":{"token":"a","token":"b"}}`,
		"{\"message\":{\"token\":\"\xff\"}}", `{"message":{"token":"t","unknown":{}}}`, `{"message":null}`, `{}`,
	} {
		if _, bad := parseSendRequest([]byte(b)); bad == nil {
			t.Errorf("accepted %q", b)
		} else if bad.message == "" || strings.Contains(bad.message, "\x00") {
			t.Errorf("%q: empty message", b)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(typicalBody)
	f.Add([]byte(`{"message":{"token":"t","data":{"a\u0062":"c"},"android":{"x":["}"]}}}`))
	f.Add([]byte(`{"message":{"topic":"x"},"validateOnly":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		pm, bad := parseSendRequest(body)
		if bad != nil {
			return
		}
		if pm.token == "" {
			return // topic/condition
		}
		got := pm.delivery()
		want, _ := reference(t, body)
		if len(got.Data) == 0 && len(want.Data) == 0 {
			got.Data, want.Data = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", body, got, want)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, bad := parseSendRequest(typicalBody); bad != nil {
			b.Fatal(bad.message)
		}
	}
}
