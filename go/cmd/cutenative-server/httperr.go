package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// maxHeaderBytes is the http.Server's MaxHeaderBytes: a request whose header is larger gets 431.
const maxHeaderBytes = 64 << 10

// net/http answers a request it cannot read, before any handler runs, by writing straight to the connection
// Accept returned, in one Write (net/http/server.go, conn.serve, Go 1.24):
//
//	"HTTP/1.1 " + status + goErrorHeaders + body
//
// with status and body, for each case:
//
//	431 Request Header Fields Too Large               431 Request Header Fields Too Large
//	501 Not Implemented                               Unsupported transfer encoding
//	400 Bad Request: missing required Host header     400 Bad Request: missing required Host header
//	505 HTTP Version Not Supported: unsupported ...   505 HTTP Version Not Supported: unsupported ...
//	400 Bad Request                                   400 Bad Request
//
// (the third and fourth are its statusError, "<code> <text>: <detail>", the last any other parse error). The
// server's every other error is {"error": {"code", "message"}} (go/server/errors.go), so serverConn.Write
// sends these in that shape too: the same status line, then Content-Type: application/json, Content-Length
// and Connection: close. Only exactly these writes are rewritten; a response net/http writes for a handler
// goes through its buffered writer, always carries a Date header, and passes byte for byte.
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// maxGoErrorLen bounds what is looked at: net/http's longest such write is under 200 bytes.
const maxGoErrorLen = 512

// goErrorCodes are the JSON codes of the statuses net/http answers on its own.
var goErrorCodes = map[int]string{
	http.StatusBadRequest:                  "bad_request",
	http.StatusRequestHeaderFieldsTooLarge: "header_too_large",
	http.StatusNotImplemented:              "not_implemented",
	http.StatusHTTPVersionNotSupported:     "http_version_not_supported",
}

// jsonFromPlainError returns the JSON form of p when p is exactly one of net/http's pre-handler errors.
func jsonFromPlainError(p []byte) ([]byte, bool) {
	if len(p) > maxGoErrorLen {
		return nil, false
	}
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return nil, false
	}
	status, body, ok := bytes.Cut(rest, []byte(goErrorHeaders))
	if !ok || len(status) < 5 || status[3] != ' ' || bytes.ContainsAny(status, "\r\n") {
		return nil, false
	}
	code, err := strconv.Atoi(string(status[:3]))
	jsonCode, known := goErrorCodes[code]
	if err != nil || !known {
		return nil, false
	}
	text := http.StatusText(code)
	reason := string(status[4:])
	var msg string
	switch {
	case reason == text && code == http.StatusNotImplemented && string(body) == "Unsupported transfer encoding":
		msg = "unsupported Transfer-Encoding: only chunked is accepted"
	case !bytes.Equal(body, status):
		return nil, false
	case reason == text && code == http.StatusRequestHeaderFieldsTooLarge:
		msg = fmt.Sprintf("the request's header is larger than the server accepts (%d KiB)", maxHeaderBytes>>10)
	case reason == text && code == http.StatusBadRequest:
		msg = "malformed HTTP/1.x request: its request line, a header or its framing could not be parsed"
	case len(reason) > len(text)+2 && reason[:len(text)+2] == text+": ":
		msg = reason[len(text)+2:] // a statusError's detail, "missing required Host header"
	default:
		return nil, false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := enc.Encode(struct {
		Error detail `json:"error"`
	}{detail{jsonCode, msg}}); err != nil {
		return nil, false
	}
	resp := make([]byte, 0, 128+len(status)+b.Len())
	resp = append(resp, "HTTP/1.1 "...)
	resp = append(resp, status...)
	resp = append(resp, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	resp = strconv.AppendInt(resp, int64(b.Len()), 10)
	resp = append(resp, "\r\nConnection: close\r\n\r\n"...)
	return append(resp, b.Bytes()...), true
}
