//! An actor with typed requests and replies: a bank `account` process and
//! three `client` processes. Each client resolves the account's PID once,
//! in its `init` (`cx.address`, from `ContextExt`), sends its requests
//! through that address, which stamps the client's PID on each as its
//! sender, and waits for each reply in its own steps; the account replies
//! to the sender it sees on the message event (`from`). Large
//! withdrawals are approved by a handler (`Builder::on` for one variant of
//! a `commands!` enum), whose answer is the process's `Response` type,
//! separate from its `Message` type.
//!
//! ```sh
//! cargo run -p stepsched --example actor
//! ```

use std::collections::HashMap;

use stepsched::{
    Address, Context, ContextExt, Error, Event, Events, Pid, Process, Scheduler, Status, StepOutput,
};

/// What clients ask the account.
#[derive(Debug, Clone, Copy)]
enum Request {
    Deposit(u64),
    Withdraw(u64),
    Balance,
    /// From the host: finish with the balance.
    Close,
}

/// What the account answers, to the request's sender.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Applied { balance: u64 },
    Refused(String),
    Balance(u64),
}

/// Messages: requests and replies both travel as messages.
#[derive(Debug)]
enum Msg {
    Request(Request),
    Reply(Reply),
}

/// A withdrawal above this needs the risk desk's approval.
const APPROVAL_LIMIT: u64 = 100;
/// The risk desk approves withdrawals up to this.
const DESK_MAX: u64 = 300;

/// The risk desk's question (a command variant with its own handler).
struct Approve(u64);
stepsched::commands! {
    enum BankCmd {
        Approve(Approve) = "approve",
    }
}

/// What processes start with.
enum Start {
    Account { opening: u64 },
    Client { account: Pid, script: Vec<Request> },
}

/// What processes finish with.
#[derive(Debug, PartialEq)]
enum Outcome {
    Closed { balance: u64 },
    Replies(Vec<Reply>),
}

/// One scheduler runs one process type: the account and its clients.
enum Bank {
    New,
    Account {
        balance: u64,
        /// Withdrawals waiting for the desk, by yield tag: who asked, how much.
        pending: HashMap<u64, (Pid, u64)>,
        next_tag: u64,
    },
    Client {
        /// The account's address, with this client as the sender.
        account: Address<Bank>,
        script: std::vec::IntoIter<Request>,
        replies: Vec<Reply>,
        started: bool,
    },
}

impl Process for Bank {
    type Input = Start;
    type Message = Msg;
    /// The desk's verdict: approved or not.
    type Response = bool;
    type Command = BankCmd;
    type Output = Outcome;

    fn init(&mut self, cx: &Context<'_, Self>, method: &str, input: Start) -> Result<(), Error> {
        *self = match (method, input) {
            ("account", Start::Account { opening }) => Bank::Account {
                balance: opening,
                pending: HashMap::new(),
                next_tag: 0,
            },
            ("client", Start::Client { account, script }) => Bank::Client {
                account: cx
                    .address(account)
                    .ok_or_else(|| Error::failed(format!("no account {account}")))?,
                script: script.into_iter(),
                replies: Vec::new(),
                started: false,
            },
            (other, _) => return Err(Error::UnknownMethod(other.to_string())),
        };
        Ok(())
    }

    fn step(
        &mut self,
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Msg, bool>,
        out: &mut StepOutput<BankCmd, Outcome>,
    ) -> Result<(), Error> {
        match self {
            Bank::New => Err(Error::failed("stepped before init")),
            Bank::Account {
                balance,
                pending,
                next_tag,
            } => {
                let reply = |to: Option<Pid>, r: Reply| {
                    // A client that is gone is no error for the account.
                    if let Some(to) = to {
                        let _ = ctx.send(to, Msg::Reply(r));
                    }
                };
                for event in events {
                    match event {
                        Event::Message {
                            from,
                            data: Msg::Request(request),
                        } => match request {
                            Request::Deposit(n) => {
                                *balance += n;
                                reply(from, Reply::Applied { balance: *balance });
                            }
                            Request::Withdraw(n) if n > APPROVAL_LIMIT => {
                                let Some(from) = from else { continue };
                                *next_tag += 1;
                                pending.insert(*next_tag, (from, n));
                                out.push_yield(*next_tag, Approve(n).into());
                            }
                            Request::Withdraw(n) if n <= *balance => {
                                *balance -= n;
                                reply(from, Reply::Applied { balance: *balance });
                            }
                            Request::Withdraw(_) => reply(from, Reply::Refused("funds".into())),
                            Request::Balance => reply(from, Reply::Balance(*balance)),
                            Request::Close => {
                                out.set_status(Status::Done(Outcome::Closed { balance: *balance }));
                                return Ok(());
                            }
                        },
                        Event::Message { .. } => {} // replies are not for us
                        Event::Completion { tag, result } => {
                            let (from, n) = pending.remove(&tag).expect("a pending withdrawal");
                            let r = match result {
                                Ok(true) if n <= *balance => {
                                    *balance -= n;
                                    Reply::Applied { balance: *balance }
                                }
                                Ok(true) => Reply::Refused("funds".into()),
                                Ok(false) => Reply::Refused("declined".into()),
                                Err(e) => Reply::Refused(e.to_string()),
                            };
                            reply(Some(from), r);
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                    }
                }
                out.set_status(Status::Idle);
                Ok(())
            }
            Bank::Client {
                account,
                script,
                replies,
                started,
            } => {
                let mut send_next = !std::mem::replace(started, true);
                for event in events {
                    match event {
                        Event::Message {
                            from,
                            data: Msg::Reply(r),
                        } => {
                            assert_eq!(from, Some(account.pid()), "replies come from the account");
                            replies.push(r);
                            send_next = true;
                        }
                        Event::Cancel => return Err(Error::Cancelled),
                        _ => {}
                    }
                }
                if send_next {
                    match script.next() {
                        // From this client: the account replies to it.
                        Some(request) => account.send(Msg::Request(request))?,
                        None => {
                            out.set_status(Status::Done(Outcome::Replies(std::mem::take(replies))));
                            return Ok(());
                        }
                    }
                }
                out.set_status(Status::Idle);
                Ok(())
            }
        }
    }
}

fn main() {
    let scheduler = Scheduler::<Bank>::builder()
        .workers(2)
        // The handler for one variant: it gets `Approve`, not `BankCmd`,
        // and answers with the `Response` type. Types are inferred.
        .on(|Approve(amount), done| {
            std::thread::spawn(move || done.complete(Ok(amount <= DESK_MAX)));
        })
        .build()
        .expect("workers");

    let account = scheduler.allocate_pid();
    let account_join = scheduler
        .submit(
            account,
            Bank::New,
            "account",
            Start::Account { opening: 1_000 },
        )
        .expect("submit the account");
    let script = vec![
        Request::Deposit(100),
        Request::Withdraw(30),
        Request::Withdraw(250), // approved by the desk
        Request::Withdraw(400), // declined by the desk
        Request::Balance,
    ];
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let start = Start::Client {
                account,
                script: script.clone(),
            };
            scheduler
                .submit(scheduler.allocate_pid(), Bank::New, "client", start)
                .expect("submit a client")
        })
        .collect();
    for client in clients {
        let pid = client.pid();
        let Outcome::Replies(replies) = client.join().expect("the client finishes") else {
            panic!("a client ends with its replies");
        };
        println!("client {pid}: {replies:?}");
        assert_eq!(replies.len(), 5);
        assert!(matches!(
            replies[..3],
            [
                Reply::Applied { .. },
                Reply::Applied { .. },
                Reply::Applied { .. }
            ]
        ));
        assert_eq!(replies[3], Reply::Refused("declined".into()));
        assert!(matches!(replies[4], Reply::Balance(_)));
    }
    // The host closes the account (a message from no process).
    scheduler
        .send(account, Msg::Request(Request::Close))
        .expect("the account is open");
    let closed = account_join.join().expect("the account closes");
    println!("account {account}: {closed:?}");
    assert_eq!(
        closed,
        Outcome::Closed {
            balance: 1_000 + 3 * 100 - 3 * (30 + 250)
        }
    );
}
