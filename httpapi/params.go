package httpapi

import (
	"net/http"
	"slices"
	"sort"
)

// checkParams refuses a query-string parameter the route does not read
// (never ignored: a client that sends ?where= must not get every document
// back as if it had filtered), naming it in field; hint ends the message.
func checkParams(r *http.Request, hint string, allowed ...string) error {
	q := r.URL.Query()
	if len(q) == 0 {
		return nil
	}
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			if k == "" {
				return newError(http.StatusBadRequest, "invalid_argument", "the query string has a parameter without a name"+hint)
			}
			return badField(k, "invalid_argument", "unknown query parameter "+k+hint)
		}
	}
	return nil
}

// dbParams are the query-string parameters each method of /api/db reads
// (ok is false for a method the route does not serve), and the hint an
// unknown one's error ends with.
func dbParams(method string) (allowed []string, hint string, ok bool) {
	switch method {
	case http.MethodGet:
		return []string{"collection", "list", "limit", "pageToken", "consistency"}, "; to filter use POST /api/db/query", true
	case http.MethodPost:
		return nil, "", true
	case http.MethodPut:
		return []string{"collection"}, "", true
	case http.MethodDelete:
		return []string{"collection", "field"}, "", true
	}
	return nil, "", false
}
