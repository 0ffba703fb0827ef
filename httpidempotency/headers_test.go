package httpidempotency_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// A live answer never says it was replayed, keyed or not, whatever the
// handler does with the header: set it in any letter case through the
// header map, then write, send early hints first, write nothing at all,
// panic (a recovery layer in front answers), or send it as a trailer. A
// replay carries the header once, "true".
func TestReplayedHeaderNeverLive(t *testing.T) {
	t.Parallel()
	sets := map[string]func(h http.Header){
		"Set":       func(h http.Header) { h.Set(httpidempotency.ReplayedHeader, "yes") },
		"lowercase": func(h http.Header) { h["idempotent-replayed"] = []string{"yes"} },
		"uppercase": func(h http.Header) { h["IDEMPOTENT-REPLAYED"] = []string{"yes"} },
	}
	answers := map[string]func(w http.ResponseWriter, set func(http.Header)){
		"nothing": func(http.ResponseWriter, func(http.Header)) {},
		"write":   func(w http.ResponseWriter, _ func(http.Header)) { _, _ = w.Write([]byte("done")) },
		"103 then write": func(w http.ResponseWriter, _ func(http.Header)) {
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = w.Write([]byte("done"))
		},
		"panic": func(http.ResponseWriter, func(http.Header)) { panic("handler failed") },
		"trailers": func(w http.ResponseWriter, set func(http.Header)) {
			w.Header().Set("Trailer", httpidempotency.ReplayedHeader)
			_, _ = w.Write([]byte("done"))
			set(w.Header()) // the declared trailer's value
			w.Header()[http.TrailerPrefix+"idempotent-replayed"] = []string{"yes"}
		},
	}
	recovery := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if recover() != nil {
					w.WriteHeader(http.StatusInternalServerError)
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
	for setName, set := range sets {
		for answerName, answer := range answers {
			for _, keyed := range []bool{false, true} {
				name := setName + ", " + answerName
				if keyed {
					name += ", keyed"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					e := newEnv(t, setup{outer: recovery, handler: func(w http.ResponseWriter, _ *http.Request) {
						set(w.Header())
						answer(w, set)
					}})
					var keys []string
					if keyed {
						keys = []string{"k"}
					}
					var early []string // the marker on informational answers
					req := e.request(t, http.MethodPost, "/orders", "{}", keys...)
					req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
						Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
							early = append(early, h.Values(httpidempotency.ReplayedHeader)...)
							return nil
						},
					}))
					live := e.send(t, req)
					if got, trailer := live.Header.Values(httpidempotency.ReplayedHeader), live.Trailer.Values(httpidempotency.ReplayedHeader); len(got) != 0 || len(early) != 0 || len(trailer) != 0 {
						t.Fatalf("live answer %d with %s %q (on 1xx: %q, as a trailer: %q)", live.Status, httpidempotency.ReplayedHeader, got, early, trailer)
					}
					if !keyed || answerName == "panic" {
						return
					}
					retry := e.post(t, "/orders", "{}", keys...)
					if got := retry.Header.Values(httpidempotency.ReplayedHeader); !slices.Equal(got, []string{"true"}) {
						t.Fatalf("replay with %s %q, want [true]", httpidempotency.ReplayedHeader, got)
					}
					e.wantRuns(t, 1)
				})
			}
		}
	}
}

// outerHeaders is a layer in front of the middleware, as request ids and
// CORS are: it sets headers of each request's own.
func outerHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		h.Set("Vary", "Origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// A replay keeps the headers that the retry's own layers in front of the
// middleware set (its request id, its CORS answer): only what the handler
// inside set, changed or removed is stored and replayed over them.
func TestReplayKeepsTheRetrysOuterHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{
		outer: outerHeaders,
		handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Del("X-Frame-Options")          // removed by the handler
			w.Header().Set("Cache-Control", "private") // changed by the handler
			w.Header().Add("Vary", "Accept-Language")  // added to
			created(w, r)
		},
	})
	post := func(id, origin string) response {
		req := e.request(t, http.MethodPost, "/orders", "{}", "k")
		req.Header.Set("X-Request-Id", id)
		req.Header.Set("Origin", origin)
		return e.send(t, req)
	}
	first := post("req-1", "https://a.example")
	retry := post("req-2", "https://b.example")
	if retry.Header.Get(httpidempotency.ReplayedHeader) != "true" || retry.Body != first.Body {
		t.Fatalf("retry %d %s, want a replay of %s", retry.Status, retry.Body, first.Body)
	}
	for name, want := range map[string][]string{
		"X-Request-Id":                {"req-2"},
		"Access-Control-Allow-Origin": {"https://b.example"},
		"X-Frame-Options":             nil,
		"Cache-Control":               {"private"},
		"Vary":                        {"Origin", "Accept-Language"},
		"Location":                    {"/orders/1"},
		"Set-Cookie":                  {"a=1", "b=2"},
	} {
		if got := retry.Header.Values(name); !slices.Equal(got, want) {
			t.Errorf("replay's %s %q, want %q", name, got, want)
		}
	}
	if got := first.Header.Get("X-Request-Id"); got != "req-1" {
		t.Errorf("live X-Request-Id %q", got)
	}
	e.wantRuns(t, 1)
}

// gzipLayer compresses the answers of requests that accept gzip.
func gzipLayer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			next.ServeHTTP(w, r)
			return
		}
		g := &gzipWriter{ResponseWriter: w, zw: gzip.NewWriter(w)}
		next.ServeHTTP(g, r)
		if !g.wroteHeader {
			g.WriteHeader(http.StatusOK)
		}
		_ = g.zw.Close()
	})
}

type gzipWriter struct {
	http.ResponseWriter
	zw          *gzip.Writer
	wroteHeader bool
}

func (g *gzipWriter) WriteHeader(code int) {
	if !g.wroteHeader {
		g.wroteHeader = true
		g.Header().Del("Content-Length")
		g.Header().Set("Content-Encoding", "gzip")
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	return g.zw.Write(p)
}

func gunzip(t *testing.T, body string) string {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Compression outside the middleware compresses each answer, replays
// included, for its own request: the store keeps the handler's identity
// body. Compression inside it is part of the handler's answer: the
// compressed body is stored and replayed with its Content-Encoding and
// Vary, whatever the retry accepts.
func TestCompression(t *testing.T) {
	t.Parallel()
	const plain = `{"order":{}}`
	post := func(e *env, accept string) response {
		req := e.request(t, http.MethodPost, "/orders", "{}", "k")
		req.Header.Set("Accept-Encoding", accept) // set: the client does not decompress
		return e.send(t, req)
	}
	t.Run("outside", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, setup{outer: gzipLayer})
		first := post(e, "gzip")
		if first.Header.Get("Content-Encoding") != "gzip" || gunzip(t, first.Body) != plain {
			t.Fatalf("live answer %q %q", first.Header.Get("Content-Encoding"), first.Body)
		}
		identity := post(e, "identity")
		if identity.Header.Get("Content-Encoding") != "" || identity.Body != plain ||
			identity.Header.Get(httpidempotency.ReplayedHeader) != "true" {
			t.Fatalf("replay to identity: %q %q, replayed %q", identity.Header.Get("Content-Encoding"), identity.Body,
				identity.Header.Get(httpidempotency.ReplayedHeader))
		}
		gz := post(e, "gzip")
		if gz.Header.Get("Content-Encoding") != "gzip" || gunzip(t, gz.Body) != plain || !slices.Equal(gz.Header.Values("Vary"), []string{"Accept-Encoding"}) {
			t.Fatalf("replay to gzip: %q, Vary %q", gz.Header.Get("Content-Encoding"), gz.Header.Values("Vary"))
		}
		e.wantRuns(t, 1)
	})
	t.Run("inside", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, setup{handler: func(w http.ResponseWriter, r *http.Request) {
			gzipLayer(http.HandlerFunc(created)).ServeHTTP(w, r)
		}})
		first := post(e, "gzip")
		retry := post(e, "identity")
		if retry.Header.Get(httpidempotency.ReplayedHeader) != "true" || retry.Header.Get("Content-Encoding") != "gzip" ||
			!slices.Equal(retry.Header.Values("Vary"), []string{"Accept-Encoding"}) || !bytes.Equal([]byte(retry.Body), []byte(first.Body)) {
			t.Fatalf("replay to identity: %q, Vary %q, replayed %q", retry.Header.Get("Content-Encoding"),
				retry.Header.Values("Vary"), retry.Header.Get(httpidempotency.ReplayedHeader))
		}
		if gunzip(t, retry.Body) != plain {
			t.Fatalf("replayed body is not the compressed answer")
		}
		e.wantRuns(t, 1)
	})
	// net/http does not sniff an encoded body's type: neither does the
	// stored copy.
	t.Run("inside, no Content-Type", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, setup{handler: func(w http.ResponseWriter, r *http.Request) {
			gzipLayer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("<html><body>ok</body></html>"))
			})).ServeHTTP(w, r)
		}})
		first := post(e, "gzip")
		retry := post(e, "gzip")
		if retry.Header.Get(httpidempotency.ReplayedHeader) != "true" ||
			!slices.Equal(retry.Header.Values("Content-Type"), first.Header.Values("Content-Type")) {
			t.Fatalf("Content-Type live %q, replayed %q", first.Header.Values("Content-Type"), retry.Header.Values("Content-Type"))
		}
		e.wantRuns(t, 1)
	})
}
