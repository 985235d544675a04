package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// What every request must pass before its body is read:
//   - Host: when Config.AllowedHosts is set, the Host header must be one of them (403 otherwise). A page on
//     another site that rebinds its DNS name to this server's address sends its own name as Host: the check
//     keeps it from reading anything (cmd/cutenative-server allows only loopback names when it listens on
//     loopback).
//   - A JSON body: a POST must say Content-Type: application/json (or another JSON type such as
//     application/problem+json); anything else is 415. Browsers send the "simple" types (text/plain, forms)
//     from any page without asking the server first; a JSON type makes them ask (a CORS preflight), which this
//     server never grants.
//   - With authentication off, a POST a browser marks as cross-site (Sec-Fetch-Site: cross-site, or an Origin
//     whose host is not the request's Host) is 403: a page the user visits cannot use a local server.

// hostAllowed reports whether the request's Host is in the allow-list.
func (s *Server) hostAllowed(r *http.Request) bool {
	if len(s.cfg.AllowedHosts) == 0 || r.Host == "" { // no Host: HTTP/1.0 health checks; a browser always sends one
		return true
	}
	host := strings.ToLower(r.Host)
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	for _, a := range s.cfg.AllowedHosts {
		a = strings.ToLower(a)
		if a == "*" || a == host || strings.TrimSuffix(strings.TrimPrefix(a, "["), "]") == name {
			return true
		}
	}
	return false
}

// hostError is the refusal of a request whose Host is not allowed.
func hostError() *apiError {
	return &apiError{Status: http.StatusForbidden, Code: "forbidden", reason: "host",
		Message: "the request's Host is not one this server answers to (-allowed-hosts)"}
}

// guard checks an API request's body type and origin.
func (s *Server) guard(r *http.Request) *apiError {
	if r.Method != http.MethodPost {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !(mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", reason: "content_type",
			Message: "the body must be JSON, sent with Content-Type: application/json"}
	}
	if len(s.keys) == 0 && crossSite(r) {
		return &apiError{Status: http.StatusForbidden, Code: "forbidden", reason: "cross_site",
			Message: "a cross-site request from a browser (Origin or Sec-Fetch-Site) to a server without API keys; " +
				"start the server with API keys to take requests from web pages"}
	}
	return nil
}

// crossSite reports whether a browser says the request comes from another site.
func crossSite(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}
