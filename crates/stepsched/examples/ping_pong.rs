//! Two processes hit a ball back and forth: each holds a [`Handle`] to its
//! own scheduler (passed in as `init` input) and sends the ball to its
//! peer by PID.
//!
//! ```sh
//! cargo run -p stepsched --example ping_pong
//! ```

use stepsched::{
    Context, Error, Event, Events, Handle, Pid, Process, Scheduler, Status, StepOutput,
};

/// The ball carries how many hits are left.
type Ball = u64;

/// One player: on each ball, hit it back with one hit less; finish with
/// the number of hits made once the rally is over.
#[derive(Default)]
struct Player {
    handle: Option<Handle<Player>>,
    peer: Option<Pid>,
    hits: u64,
    serve: Option<Ball>,
}

impl Process for Player {
    /// The scheduler's handle, the peer, and the rally length if serving.
    type Input = (Handle<Player>, Pid, Option<Ball>);
    type Message = Ball;
    type Response = Ball;
    type Command = &'static str;
    type Output = u64;

    fn init(
        &mut self,
        _: &Context<'_, Self>,
        method: &str,
        (handle, peer, serve): Self::Input,
    ) -> Result<(), Error> {
        match method {
            "play" => {
                self.handle = Some(handle);
                self.peer = Some(peer);
                self.serve = serve;
                Ok(())
            }
            other => Err(Error::UnknownMethod(other.to_string())),
        }
    }

    fn step(
        &mut self,
        _cx: &mut Context<'_, Self>,
        events: Events<'_, Ball>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        let handle = self.handle.as_ref().expect("initialized");
        let peer = self.peer.expect("initialized");
        let mut balls: Vec<Ball> = self.serve.take().into_iter().collect();
        for event in events {
            match event {
                Event::Message { data: left, .. } => balls.push(left),
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
            handle
                .send(peer, left - 1)
                .map_err(|e| Error::failed(format!("hit back: {e}")))?;
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
    let (ping, pong) = (scheduler.allocate_pid(), scheduler.allocate_pid());
    let h = scheduler.handle();
    // Pong first, so the serve finds it.
    let pong_join = scheduler
        .submit(pong, Player::default(), "play", (h.clone(), ping, None))
        .expect("submit pong");
    let ping_join = scheduler
        .submit(ping, Player::default(), "play", (h, pong, Some(RALLY)))
        .expect("submit ping");
    let ping_hits = ping_join.join().expect("ping");
    let pong_hits = pong_join.join().expect("pong");
    println!("ping hit {ping_hits} times, pong {pong_hits} times");
    assert_eq!(ping_hits + pong_hits, RALLY);
    let report = scheduler.shutdown(std::time::Duration::from_secs(1));
    println!("{report:?}");
}
