package httpidempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// paymentsServer starts a server whose POST /charges runs behind the
// middleware, and returns its URL, a function that stops it, and how many
// times the charge ran.
func paymentsServer() (url string, stop func(), charged *atomic.Int64) {
	mem := memorystore.New()
	charged = new(atomic.Int64)
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charged.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "ch_%d", n)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /charges", httpidempotency.Middleware(idempotency.NewServer(mem))(charge))
	hs := httptest.NewServer(mux)
	return hs.URL, func() { hs.Close(); mem.Close() }, charged
}

// A client whose first answer is lost after the server charged: the
// transport gave the request one key, retries it with that key, and gets
// the stored answer instead of a second charge.
func ExampleTransport() {
	url, stop, charged := paymentsServer()
	defer stop()

	// loseFirstAnswer stands for a network that drops the first answer.
	client := &http.Client{Transport: httpidempotency.Transport(&loseFirstAnswer{next: http.DefaultTransport})}
	resp, err := client.Post(url+"/charges", "application/json", strings.NewReader(`{"cents":4200}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s, replayed %q, charged %d time(s)\n",
		resp.StatusCode, body, resp.Header.Get(httpidempotency.ReplayedHeader), charged.Load())
	// Output:
	// 201 ch_1, replayed "true", charged 1 time(s)
}

// A key saved with the order it pays for, put in the request's context:
// the payment sent again after a crash, with the same key, gets the first
// answer instead of a second charge.
func ExampleContextWithKey() {
	url, stop, charged := paymentsServer()
	defer stop()
	client := &http.Client{Transport: httpidempotency.Transport(nil)}

	for range 2 { // the second time, after a crash
		ctx, err := httpidempotency.ContextWithKey(context.Background(), "order-1042-payment")
		if err != nil {
			fmt.Println(err) // the key is not 1 to 255 bytes of printable ASCII
			return
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/charges", strings.NewReader(`{"cents":4200}`))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s, replayed %q\n", resp.StatusCode, body, resp.Header.Get(httpidempotency.ReplayedHeader))
	}
	fmt.Println("charged", charged.Load(), "time(s)")
	// Output:
	// 201 ch_1, replayed ""
	// 201 ch_1, replayed "true"
	// charged 1 time(s)
}
