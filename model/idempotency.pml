/*
 * The claim protocol of github.com/grpc-idempotency/idempotency, for one
 * key, checked exhaustively by Spin. model/README.md says what it models,
 * which promise each property stands for and what it leaves out;
 * scripts/check-model.sh (make model) runs every property and every mutant.
 *
 * N servers serve CALLS calls of the key in all (a client's retries land on
 * any server; a server that crashed serves the next call), beside one
 * store, an operator and a clock. Every step of a call that holds a claim
 * may be its last (a crash), and any step may wait for any other (a
 * pause), while the clock advances. Each store operation is one atomic
 * step, as the store contract asks (store/store.go: "Every method is a
 * single atomic step"), with the memory store's semantics
 * (store/memorystore), which every store shares through the conformance
 * suite (store/storetest). Each inline and step names the Go function it
 * stands for.
 *
 * Time is relative: a tick of the clock takes one unit off the store's
 * lease and off every server's own count of it, so the state space is
 * finite. The lease is L ticks.
 *
 * Build flags (cpp):
 *   -DPOLICY=0|1|2|3   the abandon policy of every server: unset (the
 *                      default), rerun, block, recover (abandon.go)
 *   -DN=2|3            servers at once (default 2)
 *   -DCALLS=n          calls of the key in all (default 3)
 *   -DOPS=0|1|2        operator actions (default 1)
 *   -DMUTANT_...       a known bad variant (below)
 *
 * Invariants (assertions; the comment beside each names it):
 *   one_start          under block or recover, a handler that starts under
 *                      a live lease starts only when no earlier start of
 *                      the key is unresolved
 *   one_completion     at most one completion changes the entry per life
 *                      of the key (between purges)
 *   answers_agree      every answer the store backs (an executed call whose
 *                      Complete stored its outcome, a replay, a
 *                      resolution) is the same answer
 *   purge_fences       no Complete of a purged claim's token is accepted
 *   claim_kept         a claim is changed or ended only by its own call,
 *                      or, once abandoned, by the operator's resolution
 * Liveness (ltl):
 *   orphan_ends        a claim whose server died does not stay in flight
 *                      under a live lease forever (weak fairness)
 *
 * Mutants (each must be caught; scripts/check-model.sh checks that):
 *   MUTANT_RELEASE_NO_TOKEN     Store.Release deletes an in-flight entry
 *                               whatever its owner token
 *   MUTANT_COMPLETE_NO_FENCE    Store.Complete completes an in-flight entry
 *                               whatever its owner token
 *   MUTANT_TAKEOVER_SAME_TOKEN  a take-over keeps the abandoned token
 *   MUTANT_TAKEOVER_NO_ATTEMPT  a take-over keeps the attempt count
 *   MUTANT_RELEASE_AFTER_LAPSE  engine.release releases a kept claim whose
 *                               lease lapsed (decision 291 abandons it)
 *   MUTANT_TAKENOVER_RELEASES   engine.release releases a claim that took
 *                               another over (decision 293 abandons it)
 *   MUTANT_RESOLVE_SAME_TOKEN   Server.Resolve completes under the
 *                               abandoned claim's token (as before
 *                               engine.takeOver): the late handler's
 *                               Complete under that token returns nil
 */

#ifndef N
#define N 2
#endif
#ifndef CALLS
#define CALLS 3
#endif
#ifndef POLICY
#define POLICY 0
#endif
#ifndef OPS
#define OPS 1
#endif

/* AbandonPolicy (abandon.go) */
#define UNSET   0
#define RERUN   1
#define BLOCK   2
#define RECOVER 3

/* engine.claim: ClaimOptions{Keep: retention under a policy, TakeOver unless block} */
#define KEEP     (POLICY != UNSET)
#define TAKEOVER (POLICY != BLOCK)

#define L 2          /* the lease, in ticks */
#define OPERATOR CALLS /* the operator's number, beside the calls' */
#define OPDATA (CALLS+1) /* the outcome an operator resolves with; call c's is c+1 */

/* store.State, as stored: an abandoned entry is an in-flight one whose
 * kept lease ran out (memorystore entry.shown). */
#define FREE      0
#define INFLIGHT  1
#define COMPLETED 2
#define ABANDONED 3 /* only as a Claim or a Lookup reports it */

/* Results of store calls. */
#define OK        1
#define LEASELOST 2 /* store.ErrLeaseLost */
#define REFUSED   3 /* Purge: store.ErrNotFound, ErrInFlight or ErrChanged */

/* ---- the store (store.Store, store.Inspector; memorystore semantics) ---- */
byte st;        /* FREE, INFLIGHT or COMPLETED */
byte sTok;      /* owner token; once completed, the token that completed it */
bool sKept;     /* claimed with ClaimOptions.Keep */
byte sAttempt;  /* ClaimResult.Attempt of the claim that holds it */
byte sLease;    /* ticks until its lease runs out */
byte sData;     /* the outcome, once completed */
byte seq;       /* tokens issued (memorystore shard.seq): tokens are unique */

#define abandoned (st == INFLIGHT && sKept && sLease == 0)

/* ---- ghosts: what the invariants read; no process acts on them ---- */
byte sOwner = OPERATOR;  /* the call whose claim holds the entry */
bool ownerDead;          /* the server of the call that holds the entry crashed */
byte calls;              /* calls started */
byte starts;             /* handler starts of this life of the key not resolved */
byte completions;        /* completions that changed the entry, this life */
byte answer;             /* the answer the store backs, this life (0: none yet) */
byte purged;             /* bit t: the claim of token t was purged */

/* renewal.leaseEnd of each server, as ticks left, counted from the send
 * of its claim or of its last successful renewal (engine_lease.go). */
byte left[N];

/* giveAnswer: a call is answered with d, backed by the store. */
inline giveAnswer(d) {
  if
  :: answer == 0 -> answer = d
  :: else -> assert(answer == d) /* answers_agree */
  fi
}

/* changes: the step of who changes the entry's claim (ghost check). */
inline changes(who) {
  assert(who == sOwner || (who == OPERATOR && abandoned)) /* claim_kept */
}

/* newLife: the operator purged or resolved the key: its past is resolved. */
inline newLife() {
  starts = 0
}

/* memorystore.(*Store).Claim, with (*state).insert and (*state).takeOver;
 * keep and takeover are ClaimOptions.Keep > 0 and ClaimOptions.TakeOver */
inline storeClaim(me, keep, takeover, won, tok, att, found) {
  won = false;
  if
  :: st == FREE ->
    seq++; sTok = seq; st = INFLIGHT; sKept = keep; sAttempt = 1; sLease = L;
    sData = 0; sOwner = me; ownerDead = false; won = true; tok = sTok; att = 1;
    printf("c%d Claim: won, token %d, attempt 1\n", me, tok)
  :: st == INFLIGHT && !abandoned -> found = INFLIGHT
  :: abandoned && takeover -> /* (*state).takeOver */
    seq++;
#ifndef MUTANT_TAKEOVER_SAME_TOKEN
    sTok = seq;
#endif
#ifndef MUTANT_TAKEOVER_NO_ATTEMPT
    sAttempt++;
#endif
    sLease = L; sOwner = me; ownerDead = false; won = true; tok = sTok; att = sAttempt;
    printf("c%d Claim: took over the abandoned entry, token %d, attempt %d\n", me, tok, att)
  :: abandoned && !takeover -> found = ABANDONED; printf("c%d Claim: abandoned, blocked\n", me)
  :: st == COMPLETED -> found = COMPLETED; printf("c%d Claim: completed, replays %d\n", me, sData)
  fi
}

/* memorystore.(*Store).Complete: only while tok owns the in-flight (or
 * abandoned) entry; nil for a resend by the token that completed it. */
inline storeComplete(who, tok, d, r) {
  if
#ifdef MUTANT_COMPLETE_NO_FENCE
  :: st == INFLIGHT ->
#else
  :: st == INFLIGHT && sTok == tok ->
#endif
    changes(who);
    assert((purged & (1 << tok)) == 0); /* purge_fences */
    completions++;
    assert(completions == 1); /* one_completion */
    st = COMPLETED; sData = d; sTok = tok; r = OK;
    printf("Complete(token %d, outcome %d): stored\n", tok, d)
  :: st == COMPLETED && sTok == tok -> r = OK;
    printf("Complete(token %d, outcome %d): nil, the entry was completed by that token (outcome %d)\n", tok, d, sData)
  :: else -> r = LEASELOST; printf("Complete(token %d, outcome %d): ErrLeaseLost\n", tok, d)
  fi
}

/* memorystore.(*Store).Release: deletes the entry tok owns; nil when the
 * key holds nothing. deleted says whether it deleted the entry. */
inline storeRelease(who, tok, r, deleted) {
  deleted = false;
  if
#ifdef MUTANT_RELEASE_NO_TOKEN
  :: st == INFLIGHT ->
#else
  :: st == INFLIGHT && sTok == tok ->
#endif
    changes(who);
    st = FREE; sLease = 0; sOwner = OPERATOR; ownerDead = false; r = OK; deleted = true;
    printf("c%d Release(token %d): deleted\n", who, tok)
  :: st == FREE -> r = OK; printf("c%d Release(token %d): nothing there\n", who, tok)
  :: else -> r = LEASELOST; printf("c%d Release(token %d): ErrLeaseLost\n", who, tok)
  fi
}

/* memorystore.(*Store).Extend: only while tok owns it and its lease runs */
inline storeExtend(who, tok, r) {
  if
  :: st == INFLIGHT && sTok == tok && sLease > 0 -> changes(who); sLease = L; r = OK;
    printf("c%d Extend(token %d): renewed\n", who, tok)
  :: else -> r = LEASELOST; printf("c%d Extend(token %d): ErrLeaseLost\n", who, tok)
  fi
}

/* memorystore.(*Store).Abandon: ends the lease now; deletes an entry
 * claimed without Keep. */
inline storeAbandon(who, tok, r) {
  if
  :: st == INFLIGHT && sTok == tok ->
    changes(who);
    if
    :: sKept -> sLease = 0
    :: else -> st = FREE; sLease = 0; sOwner = OPERATOR; ownerDead = false
    fi;
    r = OK; printf("c%d Abandon(token %d): abandoned\n", who, tok)
  :: else -> r = LEASELOST; printf("c%d Abandon(token %d): ErrLeaseLost\n", who, tok)
  fi
}

/* memorystore.(*Store).Purge with store.PurgeOptions{InFlight, Token}
 * (0: no token) */
inline storePurge(inflight, tok, r) {
  if
  :: st == FREE -> r = REFUSED
  :: tok != 0 && tok != sTok -> r = REFUSED                 /* ErrChanged */
  :: tok == 0 || tok == sTok ->
    if
    :: st == INFLIGHT && !inflight -> r = REFUSED           /* ErrInFlight */
    :: st == COMPLETED && inflight -> r = REFUSED           /* ErrChanged */
    :: else ->
      if
      :: st == INFLIGHT -> purged = purged | (1 << sTok)
      :: else -> completions = 0; answer = 0
      fi;
      st = FREE; sLease = 0; sOwner = OPERATOR; ownerDead = false; newLife(); r = OK
    fi
  fi;
  if
  :: r == OK -> printf("op Purge(in flight %d, token %d): purged\n", inflight, tok)
  :: else -> printf("op Purge(in flight %d, token %d): refused\n", inflight, tok)
  fi
}

/* ---- the clock ---- */

#if N == 2
#define timers (left[0] > 0 || left[1] > 0)
#else
#define timers (left[0] > 0 || left[1] > 0 || left[2] > 0)
#endif

/* Time passes: one tick off the store's lease and every server's timers.
 * An entry claimed without Keep whose lease ran out does not exist
 * (memorystore (*state).owned removes it; store.Store.Claim: "An entry
 * whose lease ... has run out does not exist"). */
active proctype Clock() {
  byte i;
end:
  do
  :: d_step {
      (sLease > 0 || timers) ->
      if
      :: sLease > 0 ->
        sLease--;
        if
        :: st == INFLIGHT && !sKept && sLease == 0 -> st = FREE; sOwner = OPERATOR; ownerDead = false
        :: else -> skip
        fi
      :: else -> skip
      fi;
      i = 0;
      do
      :: i < N ->
        if
        :: left[i] > 0 -> left[i]--
        :: else -> skip
        fi;
        i++
      :: else -> break
      od;
      i = 0;
      printf("tick (lease left %d)\n", sLease)
    }
  od
}

/* ---- a server, serving calls of the key (engine.go engine.run and after) ---- */

/* a crash at this step, or not */
#define CRASHPOINT if :: goto crashed :: skip fi

/* Server me serves calls one after another, CALLS in all among the N
 * servers: the client's retries land on any server, and a server that
 * crashed comes back for the next call. Call c answers c+1 when its
 * handler (or recovery) gives an outcome. */
proctype Server(byte me) {
  byte c;         /* the call being served */
  byte tok, att, found, r;
  bool won, deleted;
  bool counted;   /* the handler started under a live lease (c.t.run) */
  bool expired;   /* renewal.expired */
  bool lost;      /* renewal.lost */
  bool cancelled; /* the handler's context was cancelled when it returned */
  bool abandon;

next:
  atomic {
    if
    :: calls < CALLS ->
      c = calls; calls++;
      tok = 0; att = 0; found = 0; r = 0; won = false; deleted = false;
      counted = false; expired = false; lost = false;
      cancelled = false; abandon = false
    :: else -> goto stop
    fi
  }

claim:
  /* engine.run: c.claimedAt = start, then engine.claim sends Store.Claim
   * (a crash before it lands is as if the call never came) */
  left[me] = L;
  atomic {
    storeClaim(c, KEEP, TAKEOVER, won, tok, att, found);
    if
    :: !won -> left[me] = 0
    :: else -> skip
    fi;
    if
    :: !won && found == COMPLETED -> /* engine.replayStored */
      printf("c%d answers %d (replayed)\n", c, sData); giveAnswer(sData)
    :: else -> skip
    fi
  }
  if
  :: won -> goto owned
  :: !won && found == COMPLETED -> goto done /* replayed (above) */
  :: !won && found == ABANDONED ->
    /* engine.run: ErrOutcomeUnknown (blocked) */
    goto done
  :: !won && found == INFLIGHT ->
    /* engine.awaitInFlight: poll again, or ErrKeyInUse */
    if
    :: goto claim
    :: goto done
    fi
  fi;

owned:
  CRASHPOINT;
  /* engine.won: the caller may have gone while the claim was under way */
  if
  :: printf("c%d caller gone before the work\n", c); goto release
  :: skip
  fi;
  /* engine.execute → engine.work (engine_abandon.go) */
  if
  :: att > 1 && POLICY == RECOVER ->
    /* engine.recoverOutcome: the method's RecoverFunc finds what the
     * abandoned attempts did (their side effects happened at their
     * starts): ErrRerun only when none is unresolved. */
    CRASHPOINT;
    if
    :: starts == 0 -> printf("c%d RecoverFunc: ErrRerun\n", c); goto handler
    :: printf("c%d RecoverFunc: a response\n", c); goto complete /* or a stored error */
    :: printf("c%d RecoverFunc: ErrOutcomeUnknown\n", c); goto release /* or an error not stored */
    fi
  :: else -> goto handler
  fi;

handler:
  /* c.t.run: the handler starts, and acts (its side effect). A handler
   * that starts after its claim's lease ran out in the store (its process
   * paused between the claim and the start) is the documented limit of a
   * lost lease (SECURITY.md: another execution may start): it is neither
   * checked nor counted, and no recovery sees it. */
  atomic {
    printf("c%d handler starts (attempt %d; unresolved starts before it: %d)\n", c, att, starts);
    if
    :: st == INFLIGHT && sTok == tok && sLease > 0 ->
      assert(POLICY < BLOCK || starts == 0); /* one_start */
      starts++; counted = true
    :: else -> printf("c%d: its lease ran out before its handler started (paused)\n", c)
    fi
  }
  /* renewal.renew runs beside the handler until it returns */
  do
  :: goto crashed
  :: atomic {
      !expired && !lost ->
      if
      :: left[me] == 0 -> expired = true; printf("c%d renewal: lease ran out here, handler cancelled\n", c) /* renewal.expire */
      :: else ->
        storeExtend(c, tok, r);
        if
        :: r == OK -> left[me] = L
        :: r != OK && KEEP -> expired = true; printf("c%d renewal refused: handler cancelled\n", c)
        :: else -> lost = true; printf("c%d renewal refused: lease lost, handler cancelled\n", c)
        fi
      fi
    }
  :: printf("c%d handler returns an outcome\n", c); break
  :: cancelled = expired || lost; /* a retryable error, or a panic */
    printf("c%d handler returns a retryable error\n", c); goto release
  od;

complete:
  /* engine.settle → engine.complete → settleStep → renewal.holding */
  CRASHPOINT;
  atomic {
    if
    :: lost -> skip                      /* errLostEarlier */
    :: else ->
      storeComplete(c, tok, c + 1, r);
      if
      :: r == OK -> printf("c%d answers %d (executed)\n", c, c + 1); /* DecisionExecuted */
        giveAnswer(c + 1)
      :: else -> skip /* DecisionLeaseLost; a kept claim answers ErrKeyInUse (engine.execute) */
      fi
    fi
  }
  goto done;

release:
  /* engine.release: a claim that took another over, or a kept claim whose
   * lease lapsed (renewal.lapsed), is abandoned, not released */
  CRASHPOINT;
  atomic {
#if defined(MUTANT_RELEASE_AFTER_LAPSE)
    abandon = att > 1;
#elif defined(MUTANT_TAKENOVER_RELEASES)
    abandon = KEEP && (expired || left[me] == 0);
#else
    abandon = att > 1 || KEEP && (expired || left[me] == 0);
#endif
    if
    :: lost -> skip                      /* errLostEarlier */
    :: !lost && abandon -> storeAbandon(c, tok, r)
    :: !lost && !abandon ->
      storeRelease(c, tok, r, deleted);
      if
      :: deleted && counted && !cancelled -> starts-- /* its own retryable error: nothing done */
      :: else -> skip
      fi
    fi
  }
  goto done;

crashed:
  atomic {
    printf("c%d: its server crashes\n", c);
    if
    :: st == INFLIGHT && sOwner == c -> ownerDead = true
    :: else -> skip
    fi
  }
done:
  left[me] = 0;
  goto next;
stop:
  skip
}

/* ---- the operator (Server.Purge, Server.Resolve; server_resolve.go) ---- */
active proctype Operator() {
  byte n, tok, r, seen, seenAtt, opTok, att, found;
  bool won, deleted;
end:
  do
  :: n < OPS ->
    n++;
    /* Inspector.Lookup: the token and the state the operator acts on */
    atomic {
      tok = sTok; seenAtt = sAttempt;
      if
      :: st == FREE -> seen = FREE
      :: abandoned -> seen = ABANDONED
      :: else -> seen = st
      fi;
      printf("op Lookup: state %d, token %d (1 in flight, 2 completed, 3 abandoned)\n", seen, tok)
    }
    if
    :: seen == COMPLETED ->
      /* Server.Purge of a completed entry, fenced by its token */
      atomic { storePurge(false, tok, r) }
    :: seen == INFLIGHT || seen == ABANDONED ->
      /* Server.Resolve with Rerun of an abandoned entry, or Server.Purge
       * of an in-flight one whose handler the operator believes gone:
       * both Purge{InFlight, Token} */
      atomic { storePurge(true, tok, r) }
    :: seen == ABANDONED ->
      /* Server.Resolve with a Response (server_resolve.go): engine.takeOver
       * claims the entry with ClaimOptions{Keep, TakeOver}, under a token
       * of its own, and goes on only when it replaced the attempt looked
       * at (ClaimResult.Attempt == info.Attempt+1), giving back anything
       * else it took (Abandon, or Release of a free key's claim); then
       * Server.complete sends Complete under its own token. */
#ifdef MUTANT_RESOLVE_SAME_TOKEN
      won = true; opTok = tok; att = seenAtt + 1;
#else
      atomic {
        storeClaim(OPERATOR, true, true, won, opTok, att, found);
        if
        :: won && att != seenAtt + 1 ->
          if
          :: att == 1 -> storeRelease(OPERATOR, opTok, r, deleted)
          :: else -> storeAbandon(OPERATOR, opTok, r)
          fi;
          won = false
        :: else -> skip
        fi
      }
#endif
      atomic {
        if
        :: won -> storeComplete(OPERATOR, opTok, OPDATA, r)
        :: else -> r = LEASELOST
        fi;
        if
        :: r == OK -> printf("op Resolve: resolved with %d\n", OPDATA); newLife(); giveAnswer(OPDATA)
        :: else -> printf("op Resolve: ErrChanged\n") /* store.ErrChanged */
        fi
      }
    :: else -> skip
    fi
  :: else -> break
  od
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < N -> run Server(i); i++
    :: else -> break
    od
  }
}

/* orphan: an entry in flight under a live lease whose server died */
#define orphan (st == INFLIGHT && sLease > 0 && ownerDead)
ltl orphan_ends { [] (orphan -> <> !orphan) }
