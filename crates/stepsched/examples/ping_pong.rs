//! Two processes hit a ball back and forth: the server sends the ball to
//! its peer by PID (`ctx.send`), and each hits it back to the sender it
//! sees on the message event.
//!
//! ```sh
//! cargo run -p stepsched --example ping_pong
//! ```

use stepsched::{Context, Error, Event, Events, Pid, Process, Scheduler, Status, StepOutput};

/// The ball carries how many hits are left.
type Ball = u64;

/// One player: on each ball, hit it back with one hit less; finish with
/// the number of hits made once the rally is over.
#[derive(Default)]
struct Player {
    hits: u64,
    serve: Option<(Pid, Ball)>,
}

impl Process for Player {
    /// The peer to serve to and the rally length, if serving.
    type Input = Option<(Pid, Ball)>;
    type Message = Ball;
    type Response = ();
    type Command = &'static str;
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
        ctx: &mut Context<'_, Self>,
        events: Events<'_, Ball, ()>,
        out: &mut StepOutput<&'static str, u64>,
    ) -> Result<(), Error> {
        let mut balls: Vec<(Pid, Ball)> = self.serve.take().into_iter().collect();
        for event in events {
            match event {
                Event::Message {
                    from: Some(peer),
                    data: left,
                } => balls.push((peer, left)),
                Event::Message { from: None, .. } => {
                    return Err(Error::failed("a ball from outside the game"));
                }
                Event::Cancel => return Err(Error::Cancelled),
                Event::Completion { .. } => {}
            }
        }
        for (peer, left) in balls {
            if left == 0 {
                // The peer made the last hit.
                out.set_status(Status::Done(self.hits));
                return Ok(());
            }
            self.hits += 1;
            ctx.send(peer, left - 1)
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
    // Pong first, so the serve finds it.
    let pong_join = scheduler
        .submit(pong, Player::default(), "play", None)
        .expect("submit pong");
    let ping_join = scheduler
        .submit(ping, Player::default(), "play", Some((pong, RALLY)))
        .expect("submit ping");
    let ping_hits = ping_join.join().expect("ping");
    let pong_hits = pong_join.join().expect("pong");
    println!("ping hit {ping_hits} times, pong {pong_hits} times");
    assert_eq!(ping_hits + pong_hits, RALLY);
    let report = scheduler
        .shutdown(std::time::Duration::from_secs(1))
        .expect("not on one of the scheduler's workers");
    println!("{report:?}");
}
