package readonly

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
)

// ErrWrite is what every refused request fails with.
var ErrWrite = errors.New("refused: explain is read-only")

// transport lets only reads through.
type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrWrite)
}

// Config returns a copy of cfg whose clients can only read.
func Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return transport{next: rt} })
	return out
}
