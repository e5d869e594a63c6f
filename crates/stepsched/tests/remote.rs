//! The remote route: sends to PIDs of other nodes go to the route a node
//! layer sets, with their sender; without one they are unknown PIDs; the
//! route is dropped at shutdown even when it holds a handle.
#![cfg(not(stepsched_loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use stepsched::{
    Context, Error, Events, Handle, Package, Pid, Process, Receiver, Scheduler, SendError, Status,
    StepOutput,
};

/// Sends one message to `to` from its first step, then ends with what the
/// send answered.
struct Sender {
    to: Pid,
}

impl Process for Sender {
    type Input = ();
    type Message = u32;
    type Response = ();
    type Command = String;
    type Output = bool;

    fn init(&mut self, _: &Context<'_, Self>, _: &str, (): ()) -> Result<(), Error> {
        Ok(())
    }

    fn step(
        &mut self,
        cx: &mut Context<'_, Self>,
        _: Events<'_, u32, ()>,
        out: &mut StepOutput<String, bool>,
    ) -> Result<(), Error> {
        let sent = cx.send(self.to, 41).is_ok();
        out.set_status(Status::Done(sent));
        Ok(())
    }
}

/// A route that keeps what it gets, holds a handle of the scheduler it
/// serves (as a node layer does), and counts its drops.
struct Outbox {
    got: Mutex<Vec<Package<u32>>>,
    _handle: Mutex<Option<Handle<Sender>>>,
    dropped: Arc<AtomicUsize>,
}

impl Receiver<u32> for Outbox {
    fn send(&self, package: Package<u32>) -> Result<(), SendError<u32>> {
        self.got.lock().unwrap().push(package);
        Ok(())
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_step_sends_to_another_node_through_the_route_with_its_sender() {
    let s = Scheduler::<Sender>::builder()
        .node(1)
        .workers(1)
        .build()
        .unwrap();
    let elsewhere = Pid::new(2, 7);

    // No route: a PID of another node is unknown here.
    let pid = s.allocate_pid();
    let join = s.submit(pid, Sender { to: elsewhere }, "run", ()).unwrap();
    assert_eq!(join.join(), Ok(false));

    let dropped = Arc::new(AtomicUsize::new(0));
    let outbox = Arc::new(Outbox {
        got: Mutex::new(Vec::new()),
        _handle: Mutex::new(Some(s.handle())),
        dropped: dropped.clone(),
    });
    s.handle().route_remote(outbox.clone());
    let pid = s.allocate_pid();
    let join = s.submit(pid, Sender { to: elsewhere }, "run", ()).unwrap();
    assert_eq!(join.join(), Ok(true));
    {
        let got = outbox.got.lock().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].from, got[0].to, got[0].payload),
            (Some(pid), elsewhere, 41)
        );
    }
    // A PID of this node never goes to the route.
    assert!(s.send(Pid::new(1, 999), 1).unwrap_err().is_unknown_pid());
    assert_eq!(outbox.got.lock().unwrap().len(), 1);

    // The route holds a handle; the shutdown drops it all the same.
    drop(outbox);
    drop(s);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the route was dropped");
}
