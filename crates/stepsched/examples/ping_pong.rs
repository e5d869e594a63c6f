//! Two processes hit a ball back and forth. They are submitted together
//! (`Handle::submit_group`), so each knows the other's address before
//! either runs; an address from the group stamps its holder's PID on what
//! it sends, and each player checks that a ball comes from its peer
//! (`event.sender()`).
//!
//! ```sh
//! cargo run -p stepsched --example ping_pong
//! ```

use stepsched::{
    Address, Context, Error, Event, Events, NoCommand, Process, Scheduler, Status, StepOutput,
};

/// The ball carries how many hits are left.
type Ball = u64;

/// One player: on each ball, hit it back with one hit less; finish with
/// the number of hits made once the rally is over.
struct Player {
    /// The other player, with this one as the sender.
    peer: Address<Player>,
    hits: u64,
    serve: Option<Ball>,
}

impl Process for Player {
    /// The rally length, if serving.
    type Input = Option<Ball>;
    type Message = Ball;
    /// A player never yields: no command, and (by convention) the
    /// message type as the response type.
    type Response = Self::Message;
    type Command = NoCommand;
    type Output = u64;

    fn init(
        &mut self,
        _: &Context<'_, Self>,
        method: &str,
        serve: Self::Input,
    ) -> Result<(), Error> {
        match method {
            "play" => {
                self.serve = serve;
                Ok(())
            }
            other => Err(Error::UnknownMethod(other.to_string())),
        }
    }

    fn step(
        &mut self,
        _: &mut Context<'_, Self>,
        events: Events<'_, Ball>,
        out: &mut StepOutput<NoCommand, u64>,
    ) -> Result<(), Error> {
        let mut balls: Vec<Ball> = self.serve.take().into_iter().collect();
        for event in events {
            match event {
                Event::Message { from, data: left } if from == Some(self.peer.pid()) => {
                    balls.push(left);
                }
                Event::Message { .. } => {
                    return Err(Error::failed("a ball from outside the game"));
                }
                Event::Cancel => return Err(Error::Cancelled),
                Event::Completion { .. } => {}
            }
        }
        for left in balls {
            if left == 0 {
                // The peer made the last hit.
                out.set_status(Status::Done(self.hits));
                return Ok(());
            }
            self.hits += 1;
            // Stamped with this player's PID: the peer sees who hit it.
            self.peer.send(left - 1)?;
            if left == 1 {
                // Our hit was the last one.
                out.set_status(Status::Done(self.hits));
                return Ok(());
            }
        }
        out.set_status(Status::Idle);
        Ok(())
    }
}

fn main() {
    const RALLY: Ball = 10_000;
    let scheduler = Scheduler::<Player>::builder()
        .workers(2)
        .build()
        .expect("workers");
    // Member 0 (ping) serves to member 1 (pong), and pong's address of
    // ping exists before either runs: no PID allocated by hand, no
    // submit order to get right.
    let mut players = scheduler
        .submit_group(2, "play", |members| {
            let me = members.me();
            let player = Player {
                peer: members.address(1 - me),
                hits: 0,
                serve: None,
            };
            (player, (me == 0).then_some(RALLY))
        })
        .expect("submit the players");
    let pong_join = players.pop().expect("pong");
    let ping_join = players.pop().expect("ping");
    let ping_hits = ping_join.join().expect("ping");
    let pong_hits = pong_join.join().expect("pong");
    println!("ping hit {ping_hits} times, pong {pong_hits} times");
    assert_eq!(ping_hits + pong_hits, RALLY);
    let report = scheduler
        .shutdown(std::time::Duration::from_secs(1))
        .expect("not on one of the scheduler's workers");
    println!("{report:?}");
}
