package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// commands are the scripts' commands besides testscript's own.
var commands = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"ctl":        cmdCtl,
	"call":       cmdCall,
	"release":    cmdRelease,
	"ledger":     cmdLedger,
	"deploy":     cmdDeploy,
	"json":       cmdJSON,
	"grab":       cmdGrab,
	"sealcall":   cmdSealCall,
	"emptytable": cmdEmptyTable,
	"plant":      cmdPlant,
	"abandon":    cmdAbandon,
}

// cmdEmptyTable makes TABLE a store table, holding nothing, beside the
// script's own (a PostgreSQL or MySQL store, or a SQLite store, in its
// file).
//
//	emptytable TABLE
func cmdEmptyTable(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: emptytable TABLE")
	}
	tb := rigOf(ts).tb
	var st interface {
		Migrate(context.Context) error
		Close() error
	}
	switch rigOf(ts).store.(type) {
	case *postgresstore.Store:
		st = postgresstore.New(pgtest.Pool(tb, 2), postgresstore.WithTable(args[0]), postgresstore.WithSweepInterval(0))
	case *mysqlstore.Store:
		st = mysqlstore.New(mysqltest.DB(tb, 2), mysqlstore.WithTable(args[0]), mysqlstore.WithSweepInterval(0))
	case *sqlitestore.Store:
		st = sqlitestore.New(sqliteDB(tb, rigOf(ts).file), sqlitestore.WithTable(args[0]), sqlitestore.WithSweepInterval(0))
	default:
		ts.Fatalf("emptytable: the script's store has no tables")
	}
	ts.Check(st.Migrate(context.Background()))
	ts.Check(st.Close())
}

// sealKey is the key that sealcall's server seals its records with.
var sealKey = idempotency.SealingKey{ID: "k-ops", Secret: bytes.Repeat([]byte{7}, idempotency.SealingKeySize)}

// cmdSealCall runs work once under the operation ledger.seal, for tenant
// acme, with KEY, on a server of the fleet that seals its records
// (idempotency.WithSealing, key k-ops) over the script's store, and
// prints "sealed KEY".
//
//	sealcall KEY
func cmdSealCall(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sealcall KEY")
	}
	srv := idempotency.NewServer(rigOf(ts).store, idempotency.WithScope(tenant),
		idempotency.WithSealing(idempotency.Sealing{Keys: idempotency.NewKeyring(sealKey)}))
	defer srv.Close()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	_, err := idempotency.Once(ctx, srv, "ledger.seal", args[0], nil, func(context.Context) error { return nil })
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "sealed %s\n", args[0])
}

// cmdPlant completes an entry under a store key that is not UTF-8, as a
// key copied by hand may be, in the script's store itself.
//
//	plant
func cmdPlant(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: plant")
	}
	st := rigOf(ts).store
	ctx := context.Background()
	const key = "copied-\xff\xfe-key"
	c, err := st.Claim(ctx, key, []byte("fp"), time.Minute, store.ClaimOptions{})
	ts.Check(err)
	ts.Check(st.Complete(ctx, key, c.Token, []byte("x"), time.Hour))
}

// cmdAbandon leaves KEY of the shop's Charge abandoned in the script's
// store, as a server that died mid-charge leaves it: claimed with a keep
// for the request call sends (-customer, -amount, tenant acme), its lease
// then ended; and prints "abandoned KEY".
//
//	abandon [-customer alice] [-amount 1999] KEY
func cmdAbandon(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("abandon", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	customer := fs.String("customer", "alice", "")
	amount := fs.Int64("amount", 1999, "")
	if neg || fs.Parse(args) != nil || fs.NArg() != 1 {
		ts.Fatalf("usage: abandon [-customer C] [-amount N] KEY")
	}
	r := rigOf(ts)
	files, sd, err := shopFiles()
	ts.Check(err)
	md := sd.Methods().ByName("Charge")
	req := dynamicpb.NewMessage(md.Input())
	req.Set(md.Input().Fields().ByName("customer"), protoreflect.ValueOfString(*customer))
	req.Set(md.Input().Fields().ByName("amount_cents"), protoreflect.ValueOfInt64(*amount))
	const method = "/" + shopService + "/Charge"
	fp, err := idempotency.Fingerprint(method, req)
	ts.Check(err)
	srv := idempotency.NewServer(r.store, idempotency.WithDescriptors(files), idempotency.WithScope(tenant))
	defer srv.Close()
	sk, err := srv.StoreKey(method, "acme", fs.Arg(0))
	ts.Check(err)
	ctx := context.Background()
	c, err := r.store.Claim(ctx, sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	ts.Check(err)
	if !c.Won() {
		ts.Fatalf("abandon: the key is taken")
	}
	ts.Check(r.store.Abandon(ctx, sk, c.Token))
	fmt.Fprintf(ts.Stdout(), "abandoned %s\n", fs.Arg(0))
}

func rigOf(ts *testscript.TestScript) *rig { return ts.Value(rigKey{}).(*rig) }

// cmdCtl runs idempotencyctl, as a process of its own, with the flags
// that reach the script's admin service (as operator alice) or store
// (with the shop service's descriptor set), then args; and checks its exit
// code.
//
//	ctl [-exit N] [-as OPERATOR] [-nodesc] [-bare] [-sh] args...
//
// -exit is the exit code expected (0); -as the operator the admin service
// is called as (” for none); -nodesc leaves out --descriptor-set; -bare
// leaves out every flag of the way in; -sh runs the command line through
// sh -c, args written as they are (a shell splits them as an operator's
// would), the flags of the way in quoted.
func cmdCtl(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("use ctl -exit N rather than ! ctl")
	}
	fs := flag.NewFlagSet("ctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	want := fs.Int("exit", 0, "")
	as := fs.String("as", alice, "")
	nodesc := fs.Bool("nodesc", false, "")
	bare := fs.Bool("bare", false, "")
	sh := fs.Bool("sh", false, "")
	if err := fs.Parse(args); err != nil {
		ts.Fatalf("ctl: %v", err)
	}
	r := rigOf(ts)
	var full []string
	switch {
	case *bare:
	case r.direct:
		full = slices.Clone(r.flags)
		if !*nodesc {
			full = append(full, "--descriptor-set", r.descriptors)
		}
	default:
		full = slices.Clone(r.flags)
		if *as != "" {
			full = append(full, "--header", "x-operator="+*as)
		}
	}
	var err error
	if *sh {
		line := "idempotencyctl"
		for _, a := range full {
			line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		err = ts.Exec("sh", "-c", line+" "+strings.Join(fs.Args(), " "))
	} else {
		err = ts.Exec("idempotencyctl", append(full, fs.Args()...)...)
	}
	got := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("idempotencyctl: %v", err)
	}
	if got != *want {
		ts.Fatalf("idempotencyctl exited %d, want %d", got, *want)
	}
}

// cmdCall charges through the shop service, as a client would, with its
// key, and prints "charged KEY: ch_N" (the handler ran), "replayed KEY:
// ch_N" (the stored answer), or "KEY: error CODE: message" (an error, which
// ! call expects).
//
//	call [-bg] [-method Charge] [-customer alice] [-amount 1999] [-tenant acme] KEY
//
// -bg starts the call, waits until its handler has started (a slow
// customer's waits until release), and returns; release prints its
// answer. The client sends -tenant as x-tenant, the server's scope.
func cmdCall(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bg := fs.Bool("bg", false, "")
	method := fs.String("method", "Charge", "")
	customer := fs.String("customer", "alice", "")
	amount := fs.Int64("amount", 1999, "")
	tenant := fs.String("tenant", "acme", "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		ts.Fatalf("usage: call [-bg] [-method M] [-customer C] [-amount N] [-tenant T] KEY")
	}
	key := fs.Arg(0)
	r := rigOf(ts)
	_, sd, err := shopFiles()
	ts.Check(err)
	md := sd.Methods().ByName(protoreflect.Name(*method))
	if md == nil {
		ts.Fatalf("call: no method %s", *method)
	}
	req := dynamicpb.NewMessage(md.Input())
	req.Set(md.Input().Fields().ByName("customer"), protoreflect.ValueOfString(*customer))
	req.Set(md.Input().Fields().ByName("amount_cents"), protoreflect.ValueOfInt64(*amount))
	do := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", *tenant)
		resp := dynamicpb.NewMessage(md.Output())
		var replayed bool
		err := r.shop.Invoke(ctx, "/"+shopService+"/"+*method, req, resp, idempotency.WithKey(key), idempotency.ReplayedInto(&replayed))
		if err != nil {
			st := status.Convert(err)
			return fmt.Sprintf("%s: error %s: %s", key, st.Code(), st.Message())
		}
		verb := "charged"
		if replayed {
			verb = "replayed"
		}
		return fmt.Sprintf("%s %s: %s", verb, key, resp.Get(md.Output().Fields().ByName("charge_id")).String())
	}
	if *bg {
		r.calls.Go(func() {
			answer := do()
			r.mu.Lock()
			r.answers = append(r.answers, answer)
			r.mu.Unlock()
		})
		ts.Check(r.ledger.waitStarted(key))
		return
	}
	answer := do()
	fmt.Fprintln(ts.Stdout(), answer)
	if failed := strings.Contains(answer, ": error "); failed != neg {
		ts.Fatalf("call %s: %s", key, answer)
	}
}

// cmdRelease lets the slow charges finish, waits for the calls started
// with call -bg, and prints their answers.
func cmdRelease(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: release")
	}
	r := rigOf(ts)
	r.ledger.unblock()
	r.calls.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.answers {
		fmt.Fprintln(ts.Stdout(), a)
	}
	r.answers = nil
}

// cmdLedger checks how many times the handler charged a key.
//
//	ledger KEY N
func cmdLedger(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: ledger KEY N")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	if got := rigOf(ts).ledger.count(args[0]); got != want {
		ts.Fatalf("the handler charged %s %d times, want %d", args[0], got, want)
	}
}

// cmdDeploy deploys the handler with or without the bug that declines
// every card.
//
//	deploy buggy|fixed
func cmdDeploy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 || (args[0] != "buggy" && args[0] != "fixed") {
		ts.Fatalf("usage: deploy buggy|fixed")
	}
	rigOf(ts).ledger.deploy(args[0] == "buggy")
}

// cmdJSON reads the last command's stdout, which must be JSON documents
// (protojson writes one per line), and checks the value at a path of the
// first, sets a variable to it, or checks how many documents there are.
//
//	json PATH WANT
//	json -set VAR PATH
//	json -docs N
//
// A path is dot-separated object members and array indexes
// (outcome.status.details.0.type), or len(PATH), the length of an array (0
// for a list protojson left out). A string is its text, any other value
// its JSON; a missing member is <missing>.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 || (len(args) == 3) != (args[0] == "-set") {
		ts.Fatalf("usage: json PATH WANT, json -set VAR PATH, or json -docs N")
	}
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile("stdout")))
	dec.UseNumber()
	var docs []any
	for {
		var doc any
		err := dec.Decode(&doc)
		if err == io.EOF {
			break
		}
		if err != nil {
			ts.Fatalf("stdout is not JSON: %v", err)
		}
		docs = append(docs, doc)
	}
	if args[0] == "-docs" {
		if got := strconv.Itoa(len(docs)); got != args[1] {
			ts.Fatalf("stdout holds %s JSON documents, want %s", got, args[1])
		}
		return
	}
	if len(docs) == 0 {
		ts.Fatalf("stdout holds no JSON document")
	}
	if args[0] == "-set" {
		got := lookupJSON(docs[0], args[2])
		if got == "<missing>" {
			ts.Fatalf("json: %s is missing", args[2])
		}
		ts.Setenv(args[1], got)
		return
	}
	if got := lookupJSON(docs[0], args[0]); got != args[1] {
		ts.Fatalf("json %s = %q, want %q", args[0], got, args[1])
	}
}

// cmdGrab sets a variable to the first group of a regular expression's
// first match in the last command's stdout or stderr.
//
//	grab stdout|stderr VAR REGEXP
func cmdGrab(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || (args[0] != "stdout" && args[0] != "stderr") {
		ts.Fatalf("usage: grab stdout|stderr VAR REGEXP")
	}
	re, err := regexp.Compile(args[2])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile(args[0]))
	if len(m) < 2 {
		ts.Fatalf("grab: no match of %s with a group in %s", args[2], args[0])
	}
	ts.Setenv(args[1], m[1])
}

func lookupJSON(v any, path string) string {
	if inner, ok := strings.CutPrefix(path, "len("); ok && strings.HasSuffix(inner, ")") {
		switch x := walkJSON(v, strings.TrimSuffix(inner, ")")).(type) {
		case []any:
			return strconv.Itoa(len(x))
		case missing:
			return "0" // protojson leaves out an empty list
		}
		return "<not a list>"
	}
	v = walkJSON(v, path)
	switch x := v.(type) {
	case missing:
		return "<missing>"
	case string:
		return x
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}

// missing is the value of a path that is not in a document.
type missing struct{}

func walkJSON(v any, path string) any {
	for p := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return missing{}
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return missing{}
			}
			v = x[i]
		default:
			return missing{}
		}
	}
	return v
}
