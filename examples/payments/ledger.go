package main

import (
	"errors"
	"strconv"
	"sync"
)

// Ledger errors.
var (
	errNoSuchCharge  = errors.New("no such charge")
	errOverRefunded  = errors.New("refund exceeds what is left of the charge")
	errInvalidAmount = errors.New("amount must be positive")
)

// charge is one entry of the [Ledger].
type charge struct {
	ID       string
	Customer string
	Amount   int64 // cents
	Refunded int64 // cents
}

// Ledger is the payments back end: an in-memory list of charges and what
// each customer has paid. It has no notion of retries: every call to
// [Ledger.Charge] appends a charge and moves money, so a retried request
// that reaches it twice charges twice. Keeping that from happening is the
// idempotency interceptor's job. It is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	charges []charge
	paid    map[string]int64 // customer -> cents paid, net of refunds
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{paid: make(map[string]int64)}
}

// Charge records a new charge of amount cents to customer and returns it
// with the customer's new total.
func (l *Ledger) Charge(customer string, amount int64) (charge, int64, error) {
	if amount <= 0 {
		return charge{}, 0, errInvalidAmount
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := charge{ID: "ch_" + strconv.Itoa(len(l.charges)+1), Customer: customer, Amount: amount}
	l.charges = append(l.charges, c)
	l.paid[customer] += amount
	return c, l.paid[customer], nil
}

// Refund gives amount cents of charge id back to its customer and returns
// the updated charge with the customer's new total.
func (l *Ledger) Refund(id string, amount int64) (charge, int64, error) {
	if amount <= 0 {
		return charge{}, 0, errInvalidAmount
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index(id)
	if !ok {
		return charge{}, 0, errNoSuchCharge
	}
	c := &l.charges[i]
	if amount > c.Amount-c.Refunded {
		return charge{}, 0, errOverRefunded
	}
	c.Refunded += amount
	l.paid[c.Customer] -= amount
	return *c, l.paid[c.Customer], nil
}

// Get returns charge id.
func (l *Ledger) Get(id string) (charge, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index(id)
	if !ok {
		return charge{}, false
	}
	return l.charges[i], true
}

// ChargesOf returns how many charges customer has.
func (l *Ledger) ChargesOf(customer string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.charges {
		if c.Customer == customer {
			n++
		}
	}
	return n
}

// Paid returns what customer has paid in all, net of refunds, in cents.
func (l *Ledger) Paid(customer string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paid[customer]
}

// Totals returns the number of charges and the cents charged in all.
func (l *Ledger) Totals() (charges int, cents int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.charges {
		cents += c.Amount
	}
	return len(l.charges), cents
}

// index returns the position of charge id; ids are "ch_<position+1>".
func (l *Ledger) index(id string) (int, bool) {
	const prefix = "ch_"
	if len(id) <= len(prefix) || id[:len(prefix)] != prefix {
		return 0, false
	}
	n, err := strconv.Atoi(id[len(prefix):])
	if err != nil || n < 1 || n > len(l.charges) {
		return 0, false
	}
	return n - 1, true
}
