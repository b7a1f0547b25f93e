package main

// A small server-sent events reader for RT's PocketBase side: PocketBase's
// realtime API is one GET /api/realtime stream per client (text/event-stream),
// its first event PB_CONNECT with the clientId that a POST /api/realtime then
// subscribes; each record change arrives as an event named after the
// subscription. A test client only: it reads what PocketBase writes (id,
// event, data lines, a blank line between events) and what the SSE
// specification allows besides (comments, a space after the colon, data on
// several lines, CRLF line ends).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sseEvent is one event of a stream.
type sseEvent struct {
	ID    string
	Event string // "message" when the event names none
	Data  []byte // the data lines joined by "\n"
}

// errSSETooLong: a line of the stream exceeds the reader's buffer.
var errSSETooLong = errors.New("sse: line too long")

// sseReader reads events from a stream.
type sseReader struct {
	br *bufio.Reader
}

// sseMaxLine bounds one line (a record of --value-size letters fits).
const sseMaxLine = 2 << 20

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// line reads one line without its end (LF, CRLF or CR before LF).
func (r *sseReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(buf)+len(chunk) > sseMaxLine {
			return nil, errSSETooLong
		}
		switch {
		case err == nil:
			if buf == nil {
				buf = chunk
			} else {
				buf = append(buf, chunk...)
			}
			buf = buf[:len(buf)-1]
			if n := len(buf); n > 0 && buf[n-1] == '\r' {
				buf = buf[:n-1]
			}
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, chunk...)
		default:
			if len(buf)+len(chunk) > 0 && errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF // a line cut off by the end of the stream
			}
			return nil, err
		}
	}
}

// next returns the next event; io.EOF at a clean end of the stream (an
// event cut off by the end is io.ErrUnexpectedEOF, and is not returned).
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []byte
	seen := false // a field line of this event was read
	for {
		line, err := r.line()
		if err != nil {
			if errors.Is(err, io.EOF) && seen {
				return sseEvent{}, io.ErrUnexpectedEOF
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !seen {
				continue // blank lines between events
			}
			if ev.Event == "" {
				ev.Event = "message"
			}
			if data != nil {
				ev.Data = data
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment (a keep-alive)
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		seen = true
		switch string(field) {
		case "id":
			ev.ID = string(value)
		case "event":
			ev.Event = string(value)
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
			if data == nil {
				data = []byte{}
			}
		case "retry":
		default:
			// unknown fields are ignored, as the specification says
		}
	}
}

// sseStatusError is a stream that did not open as one: its status or
// content type is wrong.
func sseStatusError(status int, contentType string, body []byte) error {
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Errorf("sse: %d %q, want 200 text/event-stream: %s", status, contentType, bytes.TrimSpace(body))
}
