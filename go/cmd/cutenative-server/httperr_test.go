package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// goPlainErrors are net/http's pre-handler writes, made with its own format strings (net/http/server.go,
// conn.serve, Go 1.24), with the status line, code and message each becomes.
var goPlainErrors = func() []struct{ write, status, code, message string } {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	statusError := func(code int, text string) string {
		return fmt.Sprintf("HTTP/1.1 %d %s: %s%s%d %s: %s", code, http.StatusText(code), text, errorHeaders, code,
			http.StatusText(code), text)
	}
	const tooLarge, badRequest = "431 Request Header Fields Too Large", "400 Bad Request"
	return []struct{ write, status, code, message string }{
		{"HTTP/1.1 " + tooLarge + errorHeaders + tooLarge, tooLarge, "header_too_large",
			"the request's header is larger than the server accepts (64 KiB)"},
		{fmt.Sprintf("HTTP/1.1 %d %s%sUnsupported transfer encoding", 501, http.StatusText(501), errorHeaders),
			"501 Not Implemented", "not_implemented", "unsupported Transfer-Encoding: only chunked is accepted"},
		{statusError(400, "missing required Host header"), "400 Bad Request: missing required Host header",
			"bad_request", "missing required Host header"},
		{statusError(400, "invalid header value"), "400 Bad Request: invalid header value", "bad_request",
			"invalid header value"},
		{statusError(505, "unsupported protocol version"), "505 HTTP Version Not Supported: unsupported protocol version",
			"http_version_not_supported", "unsupported protocol version"},
		{"HTTP/1.1 " + badRequest + errorHeaders + badRequest, badRequest, "bad_request",
			"malformed HTTP/1.x request: its request line, a header or its framing could not be parsed"},
	}
}()

// checkJSONError reads one response from r and checks it is status with the JSON error body {"error":
// {"code", "message"}} net/http's plain text became.
func checkJSONError(t *testing.T, r *bufio.Reader, status int, code, message string) {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	var e struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil || e.Error.Code == nil || e.Error.Message == nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" || !resp.Close ||
		resp.ContentLength != int64(len(body)) || *e.Error.Code != code || (message != "" && *e.Error.Message != message) ||
		*e.Error.Message == "" {
		t.Fatalf("got %s %v %q, want %d %s %q", resp.Status, resp.Header, body, status, code, message)
	}
}

// Each of net/http's plain-text errors goes out as the same status line with a JSON error body, in one write
// reported whole to net/http.
func TestPlainErrorsBecomeJSON(t *testing.T) {
	for _, tc := range goPlainErrors {
		server, client := net.Pipe()
		sc := &serverConn{Conn: server}
		go func() {
			n, err := sc.Write([]byte(tc.write))
			if n != len(tc.write) || err != nil {
				t.Errorf("Write: %d, %v; want %d, nil", n, err, len(tc.write))
			}
			sc.Close()
		}()
		raw, err := io.ReadAll(client)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, []byte("HTTP/1.1 "+tc.status+"\r\nContent-Type: application/json\r\nContent-Length: ")) {
			t.Fatalf("%q became %q", tc.write, raw)
		}
		code, _ := strconv.Atoi(tc.status[:3])
		checkJSONError(t, bufio.NewReader(bytes.NewReader(raw)), code, tc.code, tc.message)
	}
}

// Only exactly those writes are rewritten: anything else passes byte for byte.
func TestOtherWritesPassUnchanged(t *testing.T) {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	date := "\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT"
	for _, w := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 400 Bad Request" + date + errorHeaders + "400 Bad Request", // a handler's, with its Date
		"HTTP/1.1 400 Bad Request" + errorHeaders + "400 Bad Request\n",      // another body
		"HTTP/1.1 400 Bad Request" + errorHeaders + "400 Bad",
		"HTTP/1.1 431 Request Header Fields Too Large" + errorHeaders, // the body in a later write
		"HTTP/1.1 404 Not Found" + errorHeaders + "404 Not Found",     // not a status net/http sends this way
		"HTTP/1.1 501 Not Implemented" + errorHeaders + "Unsupported",
		"HTTP/1.1 400 Bad Requests: x" + errorHeaders + "400 Bad Requests: x",
		"HTTP/1.0 400 Bad Request" + errorHeaders + "400 Bad Request",
		"HTTP/1.1 400 Bad Request" + errorHeaders + "400 Bad Request" + strings.Repeat(" ", 600),
		"HTTP/1.1 100 Continue\r\n\r\n",
		"",
		"x",
	} {
		if out, ok := jsonFromPlainError([]byte(w)); ok {
			t.Errorf("%q was rewritten as %q", w, out)
		}
	}
}

// A handler's own plain-text 400 (with net/http's Date) reaches the client byte for byte as without the
// wrapper, and the server's JSON answers are untouched.
func TestHandlerResponsesPassByteForByte(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "400 Bad Request", http.StatusBadRequest)
	})
	answer := func(ln net.Listener) string {
		srv := &http.Server{Handler: handler}
		go srv.Serve(ln)
		defer srv.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		b, _ := io.ReadAll(c)
		return regexp.MustCompile(`Date: [^\r]*`).ReplaceAllString(string(b), "Date: -")
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	want := answer(plain)
	for _, maxConns := range []int{0, 4} {
		if got := answer(testListener(t, maxConns)); got != want || !strings.Contains(got, "text/plain") {
			t.Fatalf("-max-conns %d: %q, want %q", maxConns, got, want)
		}
	}
}
