package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

const chargeMethod = "/payments.v1.Payments/Charge"

// duplicates is how many identical calls step 2 sends at once.
const duplicates = 10

// run starts a server and clients in this process on the store cfg names,
// tells the story of five calls on out, and returns an error naming the
// first outcome that was not what the library promises. With cfg.OTel it
// then prints the spans and metrics of the story.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if !cfg.OTel {
		return tell(ctx, cfg, out, nil)
	}
	var spans, metrics syncBuffer
	tel, err := newTelemetry(&spans, &metrics, time.Hour) // metrics once, at shutdown
	if err != nil {
		return err
	}
	err = tell(ctx, cfg, out, tel)
	if serr := tel.shutdown(ctx); serr != nil {
		return errors.Join(err, serr)
	}
	fmt.Fprintf(out, "\nOpenTelemetry, from the SDK's stdout exporters: %d spans, one JSON object a line:\n%s",
		strings.Count(spans.String(), "\n"), spans.String())
	fmt.Fprintf(out, "Metrics:\n%s", metrics.String())
	return err
}

// tell is [run] without the printing of the telemetry.
func tell(ctx context.Context, cfg config, out io.Writer, tel *telemetry) error {
	b, err := openBackend(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.close()
	d, err := startDemo(b, newLogger(cfg), tel)
	if err != nil {
		return err
	}
	defer d.close()

	st := &story{demo: d, out: out, run: runID()}
	st.say("Payments example: %s, server on %s, client signed in as %s, run %s.\n", b.name, d.addr, tenantA, st.run)
	steps := []struct {
		title string
		do    func(context.Context) error
	}{
		{"A charge whose response is lost", st.lostResponse},
		{"Ten concurrent duplicates", st.concurrentDuplicates},
		{"The same key with a different amount", st.reusedKey},
		{"A required key left out", st.missingKey},
		{"A read needs no key", st.read},
	}
	if b.replica != nil {
		steps = append(steps, chapterTransactional(st)...)
	}
	for i, step := range steps {
		st.say("\n%d. %s\n", i+1, step.title)
		if err := step.do(ctx); err != nil {
			st.say("   FAILED: %v\n", err)
			return fmt.Errorf("step %d (%s): %w", i+1, step.title, err)
		}
	}
	return st.summary()
}

// story holds what the steps share.
type story struct {
	*demo
	out io.Writer
	run string // keeps keys unique across runs on a shared Redis

	first *paymentsv1.Payment // the charge of step 1
	// moreCharges counts the charges of steps beyond the first five.
	moreCharges int
}

func (s *story) say(format string, args ...any) { fmt.Fprintf(s.out, format, args...) }

func (s *story) key(name string) string { return s.run + "-" + name }

// lostResponse: the network loses the first response; the client
// interceptor retries with the same key and gets the stored answer.
func (s *story) lostResponse(ctx context.Context) error {
	const customer, amount = "alice", 1999
	key := s.key("order-1")
	s.say("   Charge %s %s with key %s; the network will lose the response.\n", customer, money(amount), key)
	s.network.loseNext(1)
	attempts, retries := s.meter.attempts(chargeMethod), s.meter.retries()
	var header metadata.MD
	resp, err := s.keyed.Charge(ctx, &paymentsv1.ChargeRequest{Customer: customer, AmountCents: amount},
		idempotency.WithKey(key), grpc.Header(&header))
	if err != nil {
		return fmt.Errorf("charge failed: %w", err)
	}
	s.first = resp.GetPayment()
	replayed := slices.Contains(header.Get(idempotency.ReplayedKey), "true")
	s.say("   lost responses: %d; attempts sent: %d; client retries: %d; last answer replayed from the store: %t\n",
		s.network.lostSoFar(), s.meter.attempts(chargeMethod)-attempts, s.meter.retries()-retries, replayed)
	s.say("   the client got %s for %s; the ledger holds %d charge(s) for %s, %s paid\n",
		resp.GetPayment().GetId(), money(resp.GetPayment().GetAmountCents()), s.ledger.ChargesOf(customer), customer, money(s.ledger.Paid(customer)))
	switch {
	case s.network.lostSoFar() != 1:
		return fmt.Errorf("%d responses lost, want 1", s.network.lostSoFar())
	case !replayed:
		return errors.New("the retry was not answered from the store")
	case s.ledger.ChargesOf(customer) != 1 || s.ledger.Paid(customer) != amount:
		return fmt.Errorf("%s has %d charges, %s paid; want 1 charge of %s", customer, s.ledger.ChargesOf(customer), money(s.ledger.Paid(customer)), money(amount))
	}
	s.say("   ok: charged once\n")
	return nil
}

// concurrentDuplicates: ten identical calls with one key at once.
func (s *story) concurrentDuplicates(ctx context.Context) error {
	const customer, amount = "bob", 500
	key := s.key("order-2")
	s.say("   %d calls at once: Charge %s %s, all with key %s.\n", duplicates, customer, money(amount), key)
	executed := s.meter.decisions(chargeMethod, idempotency.DecisionExecuted)
	replayed := s.meter.decisions(chargeMethod, idempotency.DecisionReplayed)
	inFlight := s.meter.decisions(chargeMethod, idempotency.DecisionInFlight)

	ids := make([]string, duplicates)
	errs := make([]error, duplicates)
	var wg sync.WaitGroup
	for i := range duplicates {
		wg.Go(func() {
			resp, err := s.keyed.Charge(ctx, &paymentsv1.ChargeRequest{Customer: customer, AmountCents: amount}, idempotency.WithKey(key))
			ids[i], errs[i] = resp.GetPayment().GetId(), err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("a duplicate failed: %w", err)
	}
	executed = s.meter.decisions(chargeMethod, idempotency.DecisionExecuted) - executed
	replayed = s.meter.decisions(chargeMethod, idempotency.DecisionReplayed) - replayed
	inFlight = s.meter.decisions(chargeMethod, idempotency.DecisionInFlight) - inFlight
	s.say("   server: executed %d, told %d attempt(s) %s and retried, replayed %d\n", executed, inFlight, idempotency.ErrKeyInUse.Reason, replayed)
	s.say("   every call got %s; the ledger holds %d charge(s) for %s, %s paid\n", ids[0], s.ledger.ChargesOf(customer), customer, money(s.ledger.Paid(customer)))
	for _, id := range ids {
		if id != ids[0] {
			return fmt.Errorf("the duplicates got different charges: %v", ids)
		}
	}
	switch {
	case executed != 1 || replayed != duplicates-1:
		return fmt.Errorf("executed %d and replayed %d, want 1 and %d", executed, replayed, duplicates-1)
	case s.ledger.ChargesOf(customer) != 1:
		return fmt.Errorf("%s has %d charges, want 1", customer, s.ledger.ChargesOf(customer))
	}
	s.say("   ok: charged once\n")
	return nil
}

// reusedKey: step 1's key with a different amount.
func (s *story) reusedKey(ctx context.Context) error {
	const customer, amount = "alice", 2500
	key := s.key("order-1")
	s.say("   Charge %s %s with key %s, which step 1 used for %s.\n", customer, money(amount), key, money(1999))
	attempts := s.meter.attempts(chargeMethod)
	_, err := s.keyed.Charge(ctx, &paymentsv1.ChargeRequest{Customer: customer, AmountCents: amount}, idempotency.WithKey(key))
	if err := s.refused(err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason); err != nil {
		return err
	}
	if n := s.meter.attempts(chargeMethod) - attempts; n != 1 {
		return fmt.Errorf("the client sent %d attempts, want 1: a reused key is never retried", n)
	}
	if n := s.ledger.ChargesOf(customer); n != 1 {
		return fmt.Errorf("%s has %d charges, want 1", customer, n)
	}
	s.say("   ok: not retried, not charged; %s still has 1 charge\n", customer)
	return nil
}

// missingKey: a client without the key interceptor calls a REQUIRED method.
func (s *story) missingKey(ctx context.Context) error {
	const customer, amount = "carol", 100
	s.say("   Charge %s %s from a client without the key interceptor.\n", customer, money(amount))
	_, err := s.plain.Charge(ctx, &paymentsv1.ChargeRequest{Customer: customer, AmountCents: amount})
	if err := s.refused(err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason); err != nil {
		return err
	}
	if n := s.ledger.ChargesOf(customer); n != 0 {
		return fmt.Errorf("%s has %d charges, want 0", customer, n)
	}
	s.say("   ok: the handler never ran\n")
	return nil
}

// read: GetCharge is NO_SIDE_EFFECTS; it needs no key and makes no
// idempotency decision.
func (s *story) read(ctx context.Context) error {
	id := s.first.GetId()
	s.say("   GetCharge %s from the client without the key interceptor.\n", id)
	before := s.decisionsFor("/payments.v1.Payments/GetCharge")
	resp, err := s.plain.GetCharge(ctx, &paymentsv1.GetChargeRequest{ChargeId: id})
	if err != nil {
		return fmt.Errorf("read failed: %w", err)
	}
	p := resp.GetPayment()
	s.say("   %s: %s charged %s, refunded %s\n", p.GetId(), p.GetCustomer(), money(p.GetAmountCents()), money(p.GetRefundedCents()))
	if p.GetId() != id || p.GetAmountCents() != s.first.GetAmountCents() {
		return fmt.Errorf("read %v, want the charge of step 1, %v", p, s.first)
	}
	if n := s.decisionsFor("/payments.v1.Payments/GetCharge") - before; n != 0 {
		return fmt.Errorf("the interceptor made %d decisions for a read, want 0", n)
	}
	s.say("   ok: no key needed, the interceptor stayed out of it\n")
	return nil
}

// decisionsFor returns the number of decisions of any kind for method.
func (s *story) decisionsFor(method string) uint64 {
	var n uint64
	for o := idempotency.DecisionExecuted; o.String() != "unknown"; o++ {
		n += s.meter.decisions(method, o)
	}
	return n
}

// refused checks that err is the status the library promises, and tells
// its reason.
func (s *story) refused(err error, code codes.Code, reason string) error {
	if err == nil {
		return fmt.Errorf("the call succeeded, want %s %s", code, reason)
	}
	st := status.Convert(err)
	got := reasonOf(st)
	s.say("   refused: %s, reason %s: %s\n", st.Code(), got, st.Message())
	if st.Code() != code || got != reason {
		return fmt.Errorf("got %s %q, want %s %s", st.Code(), got, code, reason)
	}
	return nil
}

// summary prints the ledger and the counters.
func (s *story) summary() error {
	n, cents := s.ledger.Totals()
	s.say("\nLedger: %d charges, %s in all, from %d Charge attempts on the wire.\n", n, money(cents), s.meter.attempts(chargeMethod))
	s.say("Counters (github.com/VictoriaMetrics/metrics):\n")
	if err := s.meter.writeCounters(s.out, "   "); err != nil {
		return err
	}
	if n != 2+s.moreCharges {
		return fmt.Errorf("the ledger holds %d charges, want %d", n, 2+s.moreCharges)
	}
	s.say("All outcomes as promised.\n")
	return nil
}

// reasonOf returns the ErrorInfo reason of st in the library's domain.
func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == idempotency.ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}

// money formats cents as "19.99".
func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// runID returns 8 random hex digits.
func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
