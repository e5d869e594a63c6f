//! What a step can reach through its `Context`: its own full PID and
//! cancel token, sends that carry their sender, spawn and terminate; typed
//! messages and responses; handlers whose types are inferred, and
//! per-variant handlers.

mod common;

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

use common::*;
use stepsched::{
    CancelToken, Context, Error, Event, Events, Package, Pid, Process, Receiver, Status,
    StepOutput, SubmitError, TerminateError,
};

/// The results the `on_complete` hook saw (errors as text).
type Results = std::sync::mpsc::Receiver<(Pid, Result<i64, String>)>;

/// Every result the `on_complete` hook saw, as text.
fn recording(b: Builder) -> (Builder, Results) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let b = b.on_complete(move |pid, r| {
        let r = r.copied().map_err(ToString::to_string);
        tx.lock().unwrap().send((pid, r)).unwrap();
    });
    (b, rx)
}

#[test]
fn a_step_knows_its_full_pid_and_its_cancel_token() {
    let s = Builder::new().workers(1).node(3).build().unwrap();
    let probe = Probe::new();
    let (token_tx, token_rx) = channel::<(Pid, CancelToken)>();
    let token_tx = Mutex::new(token_tx);
    let p = FnProc::new(&probe, move |_, out, ctx| {
        let token = ctx.cancel_token().clone();
        token_tx.lock().unwrap().send((ctx.pid(), token)).unwrap();
        out.set_status(Status::Idle);
        Ok(())
    });
    let pid = s.allocate_pid();
    assert_eq!(pid.node(), 3);
    let h = s.submit(pid, p, "main", 0).unwrap();
    let (seen, token) = token_rx.recv().unwrap();
    assert_eq!(seen, pid, "the node is part of the step's PID");
    assert!(!token.is_cancelled());
    s.terminate(pid).unwrap();
    assert!(
        token.is_cancelled(),
        "the step's token is the one terminate cancels"
    );
    assert_eq!(join(h), Err(Error::Terminated));
}

/// Replies to each message with the message plus one, to its sender.
fn echo(probe: &Arc<Probe>) -> FnProc {
    FnProc::new(probe, |events, out, ctx| {
        for e in events {
            if let Event::Message {
                from: Some(from),
                data,
            } = e
            {
                ctx.send(from, data + 1).unwrap();
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    })
}

#[test]
fn a_message_sent_from_a_step_carries_its_sender_and_a_reply_comes_back() {
    let s = Builder::new().workers(2).build().unwrap();
    let probe = Probe::new();
    let echo_pid = s.allocate_pid();
    let echo_h = s.submit(echo_pid, echo(&probe), "main", 0).unwrap();
    let mut asked = false;
    let client = FnProc::new(&probe, move |events, out, ctx| {
        if !asked {
            asked = true;
            ctx.send(echo_pid, 41).unwrap();
        }
        for e in events {
            if let Event::Message { from, data } = e {
                if from != Some(echo_pid) {
                    return Err(Error::failed(format!("reply from {from:?}")));
                }
                out.set_status(Status::Done(data));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let h = s.submit(s.allocate_pid(), client, "main", 0).unwrap();
    assert_eq!(join(h), Ok(42));
    s.terminate(echo_pid).unwrap();
    assert_eq!(join(echo_h), Err(Error::Terminated));
}

#[test]
fn a_relay_package_keeps_its_sender_and_a_handle_send_has_none() {
    let s = Builder::new().workers(1).build().unwrap();
    let probe = Probe::new();
    let (seen_tx, seen_rx) = channel();
    let seen_tx = Mutex::new(seen_tx);
    let p = FnProc::new(&probe, move |events, out, _| {
        for e in events {
            seen_tx.lock().unwrap().send(e.sender()).unwrap();
        }
        out.set_status(Status::Idle);
        Ok(())
    });
    let pid = s.allocate_pid();
    let h = s.submit(pid, p, "main", 0).unwrap();
    let handle = s.handle();
    let outside = Pid::new(9, 9);
    Receiver::send(&handle, Package::new(pid, "t", 1).with_sender(outside)).unwrap();
    assert_eq!(seen_rx.recv().unwrap(), Some(outside));
    s.send(pid, 2).unwrap();
    assert_eq!(seen_rx.recv().unwrap(), None);
    s.terminate(pid).unwrap();
    join(h).unwrap_err();
}

#[test]
fn a_step_spawns_children_and_sees_spawn_errors() {
    let (b, results) = recording(Builder::new().workers(2));
    let s = b.build().unwrap();
    let probe = Probe::new();
    let probe2 = probe.clone();
    let parent = FnProc::new(&probe, move |_, out, ctx| {
        let child = ctx.spawn(done_at_once(&probe2, 7), "main", 0).unwrap();
        if child == ctx.pid() || child.node() != ctx.pid().node() {
            return Err(Error::failed("the child got a bad PID"));
        }
        match ctx.spawn(done_at_once(&probe2, 8), "nope", 0) {
            Err(SubmitError::Init(Error::UnknownMethod(m))) if m == "nope" => {}
            other => return Err(Error::failed(format!("spawn with a bad method: {other:?}"))),
        }
        out.set_status(Status::Done(child.number() as i64));
        Ok(())
    });
    let pid = s.allocate_pid();
    let child_number = join(s.submit(pid, parent, "main", 0).unwrap()).unwrap();
    let mut seen: Vec<_> = (0..2).map(|_| results.recv().unwrap()).collect();
    seen.sort();
    let child = Pid::new(0, child_number as u64);
    let mut expected = vec![(pid, Ok(child_number)), (child, Ok(7))];
    expected.sort();
    assert_eq!(seen, expected);
    // The child was submitted from a worker (counted on that worker's
    // line), the parent from outside; the refused spawn not at all.
    let stats = s.stats();
    assert_eq!((stats.submitted, stats.completed), (2, 2));
}

#[test]
fn a_step_terminates_a_child_and_itself() {
    let (b, results) = recording(Builder::new().workers(2));
    let s = b.build().unwrap();
    let probe = Probe::new();
    let probe2 = probe.clone();
    let parent = FnProc::new(&probe, move |_, out, ctx| {
        let child = ctx.spawn(idle_until_message(&probe2), "main", 0).unwrap();
        ctx.terminate(child).unwrap();
        assert_eq!(
            ctx.terminate(child),
            Err(TerminateError::AlreadyComplete(child))
        );
        assert_eq!(
            ctx.terminate(Pid::new(5, 5)),
            Err(TerminateError::UnknownPid(Pid::new(5, 5)))
        );
        // Terminating itself: whatever this step says, the result is
        // `Terminated`.
        ctx.terminate(ctx.pid()).unwrap();
        out.set_status(Status::Done(1));
        Ok(())
    });
    let pid = s.allocate_pid();
    assert_eq!(
        join(s.submit(pid, parent, "main", 0).unwrap()),
        Err(Error::Terminated)
    );
    let terminated = Error::Terminated.to_string();
    let mut seen: Vec<_> = (0..2).map(|_| results.recv().unwrap()).collect();
    seen.sort();
    assert!(
        seen.iter().all(|(_, r)| *r == Err(terminated.clone())),
        "{seen:?}"
    );
    assert_eq!(probe.overlaps(), 0);
}

// ---- Typed events and handlers -------------------------------------------

/// An account actor: its messages are requests (with the sender to reply
/// to), its responses are audit receipts. Neither type has an arm for the
/// other.
enum Request {
    Deposit(u64),
    Balance,
    Reply(u64),
}

struct Receipt {
    id: u64,
}

struct Audit(u64);

struct Fee(u64);

stepsched::commands! {
    enum AccountCommand {
        Audit(Audit) = "audit",
        Fee(Fee) = "fee",
    }
}

#[derive(Default)]
struct Account {
    balance: u64,
    receipts: Vec<u64>,
    answered: bool,
    client: Option<Sender<u64>>,
}

impl Account {
    fn step(
        &mut self,
        ctx: &mut Context<'_, Bank>,
        events: Events<'_, Request, Receipt>,
        out: &mut StepOutput<AccountCommand, u64>,
    ) -> Result<(), Error> {
        for e in events {
            match e {
                Event::Message { from, data } => match data {
                    Request::Deposit(n) => {
                        self.balance += n;
                        out.push_yield(n, Audit(n).into());
                        out.push_yield(n + 1000, Fee(1).into());
                    }
                    Request::Balance => {
                        let to = from.ok_or_else(|| Error::failed("balance needs a sender"))?;
                        ctx.send(to, Request::Reply(self.balance)).unwrap();
                        self.answered = true;
                    }
                    Request::Reply(_) => return Err(Error::failed("an account gets no replies")),
                },
                Event::Completion { result, .. } => self.receipts.push(result?.id),
                Event::Cancel => return Err(Error::Cancelled),
            }
        }
        if self.receipts.len() == 4 && self.answered {
            let client = self.client.as_ref().unwrap();
            client.send(self.receipts.iter().sum()).unwrap();
            out.set_status(Status::Done(self.balance));
        } else {
            out.set_status(Status::Idle);
        }
        Ok(())
    }
}

/// Asks the account for its balance and finishes with the reply.
struct Teller {
    account: Option<Pid>,
}

impl Teller {
    fn step(
        &mut self,
        ctx: &mut Context<'_, Bank>,
        events: Events<'_, Request, Receipt>,
        out: &mut StepOutput<AccountCommand, u64>,
    ) -> Result<(), Error> {
        if let Some(account) = self.account.take() {
            ctx.send(account, Request::Balance).unwrap();
        }
        for e in events {
            if let Event::Message {
                data: Request::Reply(balance),
                ..
            } = e
            {
                out.set_status(Status::Done(balance));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

/// One process type for both roles (a scheduler runs one process type):
/// an enum of them, each with its own step.
enum Bank {
    Account(Account),
    Teller(Teller),
}

impl Process for Bank {
    type Input = ();
    type Message = Request;
    type Response = Receipt;
    type Command = AccountCommand;
    type Output = u64;

    fn init(&mut self, _: &Context<'_, Self>, m: &str, (): ()) -> Result<(), Error> {
        match (self, m) {
            (Bank::Account(_), "open") | (Bank::Teller(_), "ask") => Ok(()),
            _ => Err(Error::UnknownMethod(m.to_string())),
        }
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Request, Receipt>,
        out: &mut StepOutput<AccountCommand, u64>,
    ) -> Result<(), Error> {
        match self {
            Bank::Account(a) => a.step(ctx, events, out),
            Bank::Teller(t) => t.step(ctx, events, out),
        }
    }
}

#[test]
fn typed_messages_and_responses_with_inferred_and_per_variant_handlers() {
    let (audits_tx, audits_rx) = channel();
    let audits_tx = Mutex::new(audits_tx);
    let s = stepsched::Scheduler::<Bank>::builder()
        .workers(2)
        // Per-variant handlers: each gets its variant's data.
        .on(move |audit: Audit, done| {
            audits_tx.lock().unwrap().send(audit.0).unwrap();
            done.complete(Ok(Receipt { id: audit.0 }));
        })
        .on(|fee: Fee, done| {
            done.complete(Ok(Receipt { id: fee.0 }));
        })
        .build()
        .unwrap();
    let (client_tx, client_rx) = channel();
    let account = s.allocate_pid();
    let ah = s
        .submit(
            account,
            Bank::Account(Account {
                client: Some(client_tx),
                ..Account::default()
            }),
            "open",
            (),
        )
        .unwrap();
    s.send(account, Request::Deposit(10)).unwrap();
    s.send(account, Request::Deposit(20)).unwrap();
    let teller = Bank::Teller(Teller {
        account: Some(account),
    });
    let teller = s.submit(s.allocate_pid(), teller, "ask", ()).unwrap();
    // The deposits were queued before the teller existed: the balance
    // request comes after them.
    assert_eq!(join(teller), Ok(30));
    // The receipts' ids: the two audits' (10, 20) and the two fees' (1, 1).
    assert_eq!(client_rx.recv().unwrap(), 10 + 20 + 1 + 1);
    assert_eq!(join(ah), Ok(30));
    let mut audits: Vec<u64> = audits_rx.try_iter().collect();
    audits.sort();
    assert_eq!(audits, [10, 20]);
}

#[test]
fn handler_closures_need_no_type_annotations() {
    let (b, _) = recording(Builder::new().workers(1));
    let s = b
        .handler("double", |cmd, done| {
            let arg = cmd.arg * 2;
            done.complete(Ok(arg));
        })
        .build()
        .unwrap();
    let probe = Probe::new();
    let (report, _seen) = channel();
    let p = yielder(&probe, vec![(1, cmd("double", 21))], report);
    assert_eq!(
        join(s.submit(s.allocate_pid(), p, "main", 0).unwrap()),
        Ok(42)
    );
}
