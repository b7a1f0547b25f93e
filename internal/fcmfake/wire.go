package fcmfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Error bodies, laid out as Google's API front end sends them
// ({"error":{"code":...,"message":...,"status":...,"details":[...]}}).

type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []any  `json:"details,omitempty"`
}

type fcmErrorDetail struct {
	Type      string `json:"@type"`
	ErrorCode string `json:"errorCode"`
}

type badRequestDetail struct {
	Type            string           `json:"@type"`
	FieldViolations []fieldViolation `json:"fieldViolations"`
}

type fieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// errorBody renders a Google API error. fcmCode, when set, adds the
// google.firebase.fcm.v1.FcmError detail the SDK's messaging.IsXxx functions
// look at; field, when set, adds a google.rpc.BadRequest field violation.
func errorBody(code int, message, status, fcmCode, field string) []byte {
	e := apiError{Error: apiErrorBody{Code: code, Message: message, Status: status}}
	if fcmCode != "" {
		e.Error.Details = append(e.Error.Details, fcmErrorDetail{Type: fcmErrorType, ErrorCode: fcmCode})
	}
	if field != "" {
		e.Error.Details = append(e.Error.Details, badRequestDetail{
			Type:            badRequestType,
			FieldViolations: []fieldViolation{{Field: field, Description: message}},
		})
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic("fcmfake: marshalling error body: " + err.Error())
	}
	return b
}

var (
	bodyNotFound         = errorBody(404, "Method not found.", "NOT_FOUND", "", "")
	bodyUnauthenticated  = errorBody(401, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.", "UNAUTHENTICATED", "", "")
	bodySenderIDMismatch = errorBody(403, "SenderId mismatch", "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "")
	bodyUnavailable      = errorBody(503, "The service is currently unavailable.", "UNAVAILABLE", "UNAVAILABLE", "")
	bodyInternal         = errorBody(500, "Internal error encountered.", "INTERNAL", "INTERNAL", "")
	bodyQuotaExceeded    = errorBody(429, "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com'.", "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "")

	failUnregistered = sendFailure{
		status: http.StatusNotFound,
		body:   errorBody(404, "Requested entity was not found.", "NOT_FOUND", "UNREGISTERED", ""),
	}
	failInvalid = sendFailure{
		status: http.StatusBadRequest,
		body:   errorBody(400, "The registration token is not a valid FCM registration token", "INVALID_ARGUMENT", "INVALID_ARGUMENT", ""),
	}
)

// parsedMessage is a checked messages:send request body. Apart from token,
// its fields are raw JSON slices of the request body (string literals with
// their quotes, objects); delivery() decodes and copies them, which is only
// done for the deliveries that are kept.
type parsedMessage struct {
	validateOnly bool
	token        string // "" unless the target is a (non-empty) token
	title        []byte
	body         []byte
	image        []byte
	data         []byte
	android      []byte
	apns         []byte
	webpush      []byte
	fcmOptions   []byte
}

// badRequest is a body that FCM refuses with 400 INVALID_ARGUMENT.
type badRequest struct {
	message string
	field   string // for the google.rpc.BadRequest detail
	fcmCode string // FcmError errorCode, for errors FCM itself (not the JSON parser) reports
}

func unknownField(name []byte, at string) *badRequest {
	msg := "Invalid JSON payload received. Unknown name " + strconv.Quote(string(name))
	if at != "" {
		msg += " at '" + at + "'"
	}
	return &badRequest{message: msg + ": Cannot find field.", field: at}
}

func badType(at, want string) *badRequest {
	return &badRequest{message: "Invalid value at '" + at + "': expected " + want, field: at}
}

// parseSendRequest checks {"message":{...},"validate_only":bool} strictly:
// field names are matched exactly (proto field name or its lowerCamelCase
// JSON name), unknown fields and wrongly typed values are errors, and exactly
// one of token/topic/condition must be set. A null value is an unset field.
//
// The body is first checked with json.Valid; the scanner below relies on
// that and only walks the structure (no allocation beyond the token).
func parseSendRequest(body []byte) (parsedMessage, *badRequest) {
	var pm parsedMessage
	if !utf8.Valid(body) {
		return pm, &badRequest{message: "Invalid JSON payload received. Invalid UTF-8."}
	}
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		msg := "Invalid JSON payload received."
		if err != nil {
			msg += " " + err.Error()
		}
		return pm, &badRequest{message: msg}
	}
	sc := scanner{b: body}
	if sc.peek() != '{' {
		return pm, &badRequest{message: "Invalid JSON payload received. Expected an object."}
	}
	var msgStart = -1
	bad := sc.object(func(key []byte) *badRequest {
		switch string(key) {
		case "message":
			if sc.peek() == '{' {
				msgStart = sc.i
			} else if sc.peek() != 'n' {
				return badType("message", "an object")
			}
			sc.skip()
		case "validate_only", "validateOnly":
			switch v := sc.skip(); string(v) {
			case "true":
				pm.validateOnly = true
			case "false", "null":
			default:
				return badType(string(key), "a boolean")
			}
		default:
			return unknownField(key, "")
		}
		return nil
	})
	if bad != nil {
		return pm, bad
	}
	if msgStart < 0 {
		return pm, &badRequest{message: "Request contains an invalid argument.", field: "message", fcmCode: "INVALID_ARGUMENT"}
	}

	sc.i = msgStart
	targets := 0
	var tokenLit []byte
	bad = sc.object(func(key []byte) *badRequest {
		if sc.peek() == 'n' { // null: unset
			sc.skip()
			return nil
		}
		switch k := string(key); k {
		case "token", "topic", "condition", "name":
			if sc.peek() != '"' {
				return badType("message."+k, "a string")
			}
			lit := sc.skip()
			switch k {
			case "token":
				targets++
				tokenLit = lit
			case "topic", "condition":
				targets++
			}
		case "data":
			if sc.peek() != '{' {
				return badType("message.data", "a map of string to string")
			}
			start := sc.i
			if bad := sc.object(func([]byte) *badRequest {
				if sc.peek() != '"' {
					return badType("message.data", "a map of string to string")
				}
				sc.skip()
				return nil
			}); bad != nil {
				return bad
			}
			pm.data = body[start:sc.i]
		case "notification":
			if sc.peek() != '{' {
				return badType("message.notification", "an object")
			}
			return sc.object(func(nk []byte) *badRequest {
				if sc.peek() == 'n' {
					sc.skip()
					return nil
				}
				var dst *[]byte
				switch string(nk) {
				case "title":
					dst = &pm.title
				case "body":
					dst = &pm.body
				case "image":
					dst = &pm.image
				default:
					return unknownField(nk, "message.notification")
				}
				if sc.peek() != '"' {
					return badType("message.notification."+string(nk), "a string")
				}
				*dst = sc.skip()
				return nil
			})
		case "android", "apns", "webpush", "fcm_options", "fcmOptions":
			if sc.peek() != '{' {
				return badType("message."+k, "an object")
			}
			raw := sc.skip()
			switch k {
			case "android":
				pm.android = raw
			case "apns":
				pm.apns = raw
			case "webpush":
				pm.webpush = raw
			default:
				pm.fcmOptions = raw
			}
		default:
			return unknownField(key, "message")
		}
		return nil
	})
	if bad != nil {
		return pm, bad
	}
	switch {
	case targets > 1:
		return pm, &badRequest{message: "Invalid JSON payload received. Oneof field 'target' is already set: only one of token, topic, condition may be set.", field: "message"}
	case targets == 0:
		return pm, &badRequest{message: "Recipient of the message is not set.", field: "message", fcmCode: "INVALID_ARGUMENT"}
	}
	if tokenLit != nil {
		tok, err := decodeString(tokenLit)
		if err != nil {
			return pm, badType("message.token", "a string")
		}
		if tok == "" {
			return pm, &badRequest{message: "The registration token is not a valid FCM registration token", field: "message.token", fcmCode: "INVALID_ARGUMENT"}
		}
		pm.token = tok
	}
	return pm, nil
}

// delivery decodes the message into a Delivery that shares no memory with
// the request body.
func (pm *parsedMessage) delivery() Delivery {
	d := Delivery{
		Token:      pm.token,
		Title:      mustDecodeString(pm.title),
		Body:       mustDecodeString(pm.body),
		Image:      mustDecodeString(pm.image),
		Android:    cloneRaw(pm.android),
		APNS:       cloneRaw(pm.apns),
		Webpush:    cloneRaw(pm.webpush),
		FCMOptions: cloneRaw(pm.fcmOptions),
	}
	if pm.data != nil {
		d.Data = make(map[string]string)
		sc := scanner{b: pm.data}
		sc.object(func(k []byte) *badRequest {
			d.Data[mustDecodeString(sc.keyLit)] = mustDecodeString(sc.skip())
			return nil
		})
	}
	return d
}

func cloneRaw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// decodeString decodes a JSON string literal (with its quotes).
func decodeString(lit []byte) (string, error) {
	if len(lit) < 2 {
		return "", errors.New("not a string")
	}
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

func mustDecodeString(lit []byte) string {
	if lit == nil {
		return ""
	}
	s, _ := decodeString(lit)
	return s
}

// scanner walks JSON that json.Valid accepted.
type scanner struct {
	b      []byte
	i      int
	keyLit []byte // the current object key's string literal, quotes included
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// skipString moves past the string literal starting at s.i.
func (s *scanner) skipString() {
	s.i++ // opening quote
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return
		default:
			s.i++
		}
	}
}

// skip moves past the next value and returns it.
func (s *scanner) skip() []byte {
	s.ws()
	start := s.i
	if s.i >= len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '"':
		s.skipString()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				s.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				break
			}
		}
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i]
			}
			s.i++
		}
	}
	return s.b[start:s.i]
}

// object walks the object starting at the next value, calling fn for each
// member with the decoded key (raw bytes when the key has no escapes) and
// the scanner positioned at the member's value; fn must consume the value.
func (s *scanner) object(fn func(key []byte) *badRequest) *badRequest {
	s.ws()
	s.i++ // '{'
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		start := s.i
		s.skipString()
		lit := s.b[start:s.i]
		key := lit[1 : len(lit)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			k, _ := decodeString(lit)
			key = []byte(k)
		}
		s.keyLit = lit
		s.ws()
		s.i++ // ':'
		if bad := fn(key); bad != nil {
			return bad
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		s.i++ // '}'
		return nil
	}
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
