//! [`StepOutput`]: what a step writes back — its [`Status`] and its
//! [`Yields`], kept inline for up to two yields.

use std::fmt;
use std::iter::FusedIterator;

use crate::Tag;

/// How many yields a [`Yields`] holds without allocating.
pub const INLINE_YIELDS: usize = 2;

/// What the process wants after a step.
///
/// ```
/// use stepsched_process::Status;
///
/// let s: Status<u8> = Status::Done(1);
/// assert!(s.is_done());
/// assert!(!Status::<u8>::Idle.is_done());
/// ```
///
/// A step must set one: an output starts each step with *no* status, and a
/// scheduler ends a process whose step set none with an error (a forgotten
/// `set_status` must not become a process that spins).
///
/// Yields written in the same output are dispatched whatever the status,
/// except with `Done`:
///
/// | status | yields in the output |
/// |---|---|
/// | `Continue` | dispatched; the process is stepped again soon, and their completions arrive as events of later steps |
/// | `Idle` | dispatched; the process waits for their completions or a message |
/// | `Yield` | dispatched; the process waits for their completions or a message |
/// | `Done` | **not** dispatched (the process is finished; no handler is called) |
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Status<R> {
    /// Step again soon, even without new events.
    Continue,
    /// Nothing to do until an event arrives (typically a message).
    Idle,
    /// Waiting for the results of yields (written in the same output or in
    /// earlier steps), or a message.
    Yield,
    /// Finished, with this result; the process is not stepped again and the
    /// yields of this output are not dispatched.
    Done(R),
}

impl<R> Status<R> {
    /// Whether this is [`Status::Done`].
    ///
    /// ```
    /// use stepsched_process::Status;
    ///
    /// assert!(Status::Done(()).is_done());
    /// ```
    pub fn is_done(&self) -> bool {
        matches!(self, Self::Done(_))
    }
}

/// One command for a handler, with the tag its completion will carry.
///
/// ```
/// use stepsched_process::Yield;
///
/// let y = Yield { tag: 3, command: "fetch" };
/// assert_eq!(y.tag, 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Yield<C> {
    /// The correlation tag; the completion event carries it back.
    pub tag: Tag,
    /// The command for a handler.
    pub command: C,
}

/// The yields of one step: the first [`INLINE_YIELDS`] are stored inline,
/// any more in a `Vec` that keeps its capacity across
/// [`clear`](Self::clear) and [`drain`](Self::drain).
///
/// A step that yields at most two commands therefore never allocates, and a
/// reused output stops allocating once its overflow has grown to the largest
/// step. Iteration order is push order.
///
/// ```
/// use stepsched_process::{Yield, Yields};
///
/// let mut ys = Yields::new();
/// ys.push(Yield { tag: 1, command: 'a' });
/// ys.push(Yield { tag: 2, command: 'b' });
/// assert!(!ys.spilled());
/// ys.push(Yield { tag: 3, command: 'c' });
/// assert!(ys.spilled());
///
/// let tags: Vec<u64> = ys.iter().map(|y| y.tag).collect();
/// assert_eq!(tags, [1, 2, 3]);
/// let commands: String = ys.drain().map(|y| y.command).collect();
/// assert_eq!(commands, "abc");
/// assert!(ys.is_empty());
/// ```
pub struct Yields<C> {
    /// Slots `0..inline_len` are `Some`, the rest `None`.
    inline: [Option<Yield<C>>; INLINE_YIELDS],
    inline_len: usize,
    /// Non-empty only when every inline slot is full.
    overflow: Vec<Yield<C>>,
}

impl<C> Yields<C> {
    /// An empty list; does not allocate.
    ///
    /// ```
    /// use stepsched_process::Yields;
    ///
    /// let ys = Yields::<()>::new();
    /// assert!(ys.is_empty());
    /// ```
    pub const fn new() -> Self {
        Self {
            inline: [None, None],
            inline_len: 0,
            overflow: Vec::new(),
        }
    }

    /// Appends a yield.
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// ys.push(Yield { tag: 9, command: () });
    /// assert_eq!(ys.len(), 1);
    /// ```
    pub fn push(&mut self, y: Yield<C>) {
        if let Some(slot) = self.inline.get_mut(self.inline_len) {
            *slot = Some(y);
            self.inline_len += 1;
        } else {
            self.overflow.push(y);
        }
    }

    /// The number of yields.
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// (0..5).for_each(|tag| ys.push(Yield { tag, command: () }));
    /// assert_eq!(ys.len(), 5);
    /// ```
    pub fn len(&self) -> usize {
        self.inline_len + self.overflow.len()
    }

    /// Whether there are no yields.
    ///
    /// ```
    /// use stepsched_process::Yields;
    ///
    /// assert!(Yields::<()>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the yields no longer fit inline (more than [`INLINE_YIELDS`]
    /// were pushed since the last clear).
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// (0..2).for_each(|tag| ys.push(Yield { tag, command: () }));
    /// assert!(!ys.spilled());
    /// ```
    pub fn spilled(&self) -> bool {
        !self.overflow.is_empty()
    }

    /// The yield at `index` in push order.
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// (10..13).for_each(|tag| ys.push(Yield { tag, command: () }));
    /// assert_eq!(ys.get(2).map(|y| y.tag), Some(12));
    /// assert!(ys.get(3).is_none());
    /// ```
    pub fn get(&self, index: usize) -> Option<&Yield<C>> {
        if index < self.inline_len {
            self.inline[index].as_ref()
        } else {
            self.overflow.get(index - self.inline_len)
        }
    }

    /// Iterates over the yields in push order.
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// ys.push(Yield { tag: 1, command: "a" });
    /// assert_eq!(ys.iter().next().map(|y| y.command), Some("a"));
    /// ```
    pub fn iter(&self) -> YieldsIter<'_, C> {
        YieldsIter {
            inline: self.inline[..self.inline_len].iter(),
            overflow: self.overflow.iter(),
        }
    }

    /// Removes every yield, in push order; the overflow keeps its capacity.
    ///
    /// Yields the iterator is dropped before reaching are dropped too.
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// (0..4).for_each(|tag| ys.push(Yield { tag, command: () }));
    /// assert_eq!(ys.drain().map(|y| y.tag).sum::<u64>(), 6);
    /// assert!(ys.is_empty());
    /// ```
    pub fn drain(&mut self) -> YieldsDrain<'_, C> {
        // The slots are taken one by one as the iterator reaches them (and
        // by its `Drop` for the rest): no copy of the inline array is made.
        let inline_left = std::mem::take(&mut self.inline_len);
        // No `vec::Drain` (and no `Drop` of one) for an overflow never used.
        let overflow = (!self.overflow.is_empty()).then(|| self.overflow.drain(..));
        YieldsDrain {
            inline_left,
            inline: self.inline.iter_mut(),
            overflow,
        }
    }

    /// Removes every yield; the overflow keeps its capacity.
    ///
    /// ```
    /// use stepsched_process::{Yield, Yields};
    ///
    /// let mut ys = Yields::new();
    /// (0..3).for_each(|tag| ys.push(Yield { tag, command: () }));
    /// ys.clear();
    /// assert!(ys.is_empty() && !ys.spilled());
    /// ```
    pub fn clear(&mut self) {
        // The list is empty before any command is dropped, and each slot is
        // emptied before what it held is dropped: a command whose `Drop`
        // panics leaves a valid, empty list behind, the guards dropping the
        // other yields (the overflow last) on the way out. Slots at and
        // above `inline_len` are already `None`.
        let len = std::mem::take(&mut self.inline_len);
        let _overflow = ClearOnDrop(&mut self.overflow);
        empty_each(&mut self.inline[..len].iter_mut());
    }
}

/// Clears the vector when dropped, also while unwinding.
struct ClearOnDrop<'a, T>(&'a mut Vec<T>);

impl<T> Drop for ClearOnDrop<'_, T> {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// Empties every slot `slots` has left, dropping what each held in turn. If
/// one drop panics, the slots after it are emptied while unwinding (a second
/// panic then aborts, as in the drop of a slice).
fn empty_each<T>(slots: &mut std::slice::IterMut<'_, Option<T>>) {
    struct Rest<'s, 'a, T>(&'s mut std::slice::IterMut<'a, Option<T>>);
    impl<T> Drop for Rest<'_, '_, T> {
        fn drop(&mut self) {
            for slot in self.0.by_ref() {
                drop(slot.take());
            }
        }
    }
    let rest = Rest(slots);
    for slot in rest.0.by_ref() {
        drop(slot.take());
    }
}

impl<C> Default for Yields<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: fmt::Debug> fmt::Debug for Yields<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a, C> IntoIterator for &'a Yields<C> {
    type Item = &'a Yield<C>;
    type IntoIter = YieldsIter<'a, C>;

    fn into_iter(self) -> YieldsIter<'a, C> {
        self.iter()
    }
}

/// Iterator over a [`Yields`] by reference, from [`Yields::iter`].
pub struct YieldsIter<'a, C> {
    inline: std::slice::Iter<'a, Option<Yield<C>>>,
    overflow: std::slice::Iter<'a, Yield<C>>,
}

impl<'a, C> Iterator for YieldsIter<'a, C> {
    type Item = &'a Yield<C>;

    fn next(&mut self) -> Option<&'a Yield<C>> {
        // Every inline slot below `inline_len` is `Some`, so `flatten` would
        // skip nothing; `find_map` keeps the iterator a plain slice walk.
        self.inline
            .find_map(Option::as_ref)
            .or_else(|| self.overflow.next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.inline.len() + self.overflow.len();
        (n, Some(n))
    }
}

impl<C> ExactSizeIterator for YieldsIter<'_, C> {}
impl<C> FusedIterator for YieldsIter<'_, C> {}

impl<C> fmt::Debug for YieldsIter<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("YieldsIter").finish_non_exhaustive()
    }
}

/// Draining iterator over a [`Yields`], from [`Yields::drain`].
pub struct YieldsDrain<'a, C> {
    /// How many of the slots `inline` has still to give are `Some`.
    inline_left: usize,
    inline: std::slice::IterMut<'a, Option<Yield<C>>>,
    overflow: Option<std::vec::Drain<'a, Yield<C>>>,
}

impl<C> Iterator for YieldsDrain<'_, C> {
    type Item = Yield<C>;

    #[inline]
    fn next(&mut self) -> Option<Yield<C>> {
        if self.inline_left > 0 {
            self.inline_left -= 1;
            // Slots below the drained `inline_len` are `Some`.
            return self.inline.next().and_then(Option::take);
        }
        self.overflow.as_mut()?.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.inline_left + self.overflow.as_ref().map_or(0, ExactSizeIterator::len);
        (n, Some(n))
    }
}

impl<C> Drop for YieldsDrain<'_, C> {
    fn drop(&mut self) {
        // The inline yields not reached are dropped here, so every slot is
        // `None` again (`Yields`' invariant with `inline_len` 0), even if a
        // drop panics; the overflow's `Drain` drops its own.
        if std::mem::take(&mut self.inline_left) > 0 {
            empty_each(&mut self.inline);
        }
    }
}

impl<C> ExactSizeIterator for YieldsDrain<'_, C> {}
impl<C> FusedIterator for YieldsDrain<'_, C> {}

impl<C> fmt::Debug for YieldsDrain<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("YieldsDrain").finish_non_exhaustive()
    }
}

/// What one [`step`](crate::Process::step) writes: its [`Status`] and its
/// [`Yields`].
///
/// `C` is the process's [`Command`](crate::Process::Command) type and `R`
/// its [`Output`](crate::Process::Output). A scheduler keeps one output per
/// worker and [`reset`](Self::reset)s it before each step, so steady-state
/// stepping allocates nothing.
///
/// ```
/// use stepsched_process::{Status, StepOutput};
///
/// let mut out: StepOutput<&str, u32> = StepOutput::new();
/// out.push_yield(1, "read a");
/// out.push_yield(2, "read b");
/// out.set_status(Status::Yield);
///
/// assert_eq!(out.status(), Some(&Status::Yield));
/// assert_eq!(out.yields().len(), 2);
/// let dispatched: Vec<_> = out.yields_mut().drain().map(|y| (y.tag, y.command)).collect();
/// assert_eq!(dispatched, [(1, "read a"), (2, "read b")]);
///
/// out.reset();
/// assert_eq!(out.status(), None);
/// ```
pub struct StepOutput<C, R> {
    status: Option<Status<R>>,
    yields: Yields<C>,
}

impl<C, R> StepOutput<C, R> {
    /// An empty output: no status, no yields; does not allocate.
    ///
    /// ```
    /// use stepsched_process::StepOutput;
    ///
    /// let out = StepOutput::<(), ()>::new();
    /// assert_eq!(out.status(), None);
    /// assert!(out.yields().is_empty());
    /// ```
    pub const fn new() -> Self {
        Self {
            status: None,
            yields: Yields::new(),
        }
    }

    /// The status written by the step, if it wrote one.
    ///
    /// ```
    /// use stepsched_process::{Status, StepOutput};
    ///
    /// let mut out = StepOutput::<(), i8>::new();
    /// assert_eq!(out.status(), None);
    /// out.set_status(Status::Done(-1));
    /// assert_eq!(out.status(), Some(&Status::Done(-1)));
    /// ```
    pub fn status(&self) -> Option<&Status<R>> {
        self.status.as_ref()
    }

    /// Sets the status.
    ///
    /// ```
    /// use stepsched_process::{Status, StepOutput};
    ///
    /// let mut out = StepOutput::<(), ()>::new();
    /// out.set_status(Status::Idle);
    /// assert_eq!(out.status(), Some(&Status::Idle));
    /// ```
    pub fn set_status(&mut self, status: Status<R>) {
        self.status = Some(status);
    }

    /// Takes the status out, leaving none — how a scheduler moves a
    /// [`Status::Done`] result out without cloning it.
    ///
    /// ```
    /// use stepsched_process::{Status, StepOutput};
    ///
    /// let mut out = StepOutput::<(), String>::new();
    /// out.set_status(Status::Done("ok".into()));
    /// assert_eq!(out.take_status(), Some(Status::Done("ok".to_string())));
    /// assert_eq!(out.status(), None);
    /// ```
    pub fn take_status(&mut self) -> Option<Status<R>> {
        self.status.take()
    }

    /// Appends a yield: `command`, whose completion will carry `tag`.
    ///
    /// It is dispatched after the step whatever status the step sets,
    /// except [`Status::Done`] (see [`Status`]).
    ///
    /// ```
    /// use stepsched_process::StepOutput;
    ///
    /// let mut out = StepOutput::<&str, ()>::new();
    /// out.push_yield(42, "sleep 10ms");
    /// assert_eq!(out.yields().get(0).map(|y| y.tag), Some(42));
    /// ```
    pub fn push_yield(&mut self, tag: Tag, command: C) {
        self.yields.push(Yield { tag, command });
    }

    /// The yields written by the step.
    ///
    /// ```
    /// use stepsched_process::StepOutput;
    ///
    /// assert!(StepOutput::<(), ()>::new().yields().is_empty());
    /// ```
    pub fn yields(&self) -> &Yields<C> {
        &self.yields
    }

    /// The yields, mutably (to [`drain`](Yields::drain) them for dispatch).
    ///
    /// ```
    /// use stepsched_process::StepOutput;
    ///
    /// let mut out = StepOutput::<u8, ()>::new();
    /// out.push_yield(1, 7);
    /// assert_eq!(out.yields_mut().drain().count(), 1);
    /// ```
    pub fn yields_mut(&mut self) -> &mut Yields<C> {
        &mut self.yields
    }

    /// Clears the output for the next step without freeing the overflow:
    /// no status, no yields.
    ///
    /// ```
    /// use stepsched_process::{Status, StepOutput};
    ///
    /// let mut out = StepOutput::<u8, ()>::new();
    /// (0..3).for_each(|t| out.push_yield(t, 0));
    /// out.set_status(Status::Yield);
    /// out.reset();
    /// assert_eq!(out.status(), None);
    /// assert!(out.yields().is_empty());
    /// ```
    pub fn reset(&mut self) {
        // Both are emptied whatever a `Drop` does: the status is taken
        // before the yields are cleared (which leaves them empty even if a
        // command's drop panics) and dropped after (or while unwinding).
        let status = self.status.take();
        self.yields.clear();
        drop(status);
    }
}

impl<C, R> Default for StepOutput<C, R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: fmt::Debug, R: fmt::Debug> fmt::Debug for StepOutput<C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepOutput")
            .field("status", &self.status)
            .field("yields", &self.yields)
            .finish()
    }
}

#[cfg(all(test, not(stepsched_loom)))]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;

    use super::*;
    use proptest::prelude::*;

    /// A command that counts its live copies through `alive`, and whose
    /// `Drop` panics if `panics` (never while unwinding).
    struct Held {
        /// Held only for the reference count it keeps.
        _alive: Arc<()>,
        panics: bool,
    }

    impl Drop for Held {
        fn drop(&mut self) {
            if self.panics && !std::thread::panicking() {
                panic!("a command's Drop panicked");
            }
        }
    }

    /// Five yields (two inline, three in the overflow), the `panicky`-th
    /// of which panics when dropped.
    fn five_held(alive: &Arc<()>, panicky: usize) -> Yields<Held> {
        let mut ys = Yields::new();
        for tag in 0..5 {
            let command = Held {
                _alive: Arc::clone(alive),
                panics: tag == panicky as u64,
            };
            ys.push(Yield { tag, command });
        }
        ys
    }

    /// A reset whose drop of the status panics still drops the yields.
    #[test]
    fn a_panicking_drop_of_the_status_still_resets_the_yields() {
        let alive = Arc::new(());
        let mut out = StepOutput::<Held, Held>::new();
        *out.yields_mut() = five_held(&alive, usize::MAX);
        let output = Held {
            _alive: Arc::clone(&alive),
            panics: true,
        };
        out.set_status(Status::Done(output));
        assert!(catch_unwind(AssertUnwindSafe(|| out.reset())).is_err());
        assert!(out.status().is_none() && out.yields().is_empty());
        assert_eq!(
            Arc::strong_count(&alive),
            1,
            "a command or the output was not dropped"
        );
    }

    /// After a clear or a drain whose drop of a command panicked, every
    /// other command has been dropped and the list is empty and usable:
    /// the next yields pushed are the ones handed out, in order.
    #[test]
    fn a_panicking_drop_leaves_the_yields_empty_and_usable() {
        for panicky in 0..5 {
            for how in ["clear", "drain", "reset"] {
                let alive = Arc::new(());
                let mut out = StepOutput::<Held, u8>::new();
                *out.yields_mut() = five_held(&alive, panicky);
                out.set_status(Status::Done(1));
                let r = catch_unwind(AssertUnwindSafe(|| match how {
                    "clear" => out.yields_mut().clear(),
                    "reset" => out.reset(),
                    _ => drop(out.yields_mut().drain()),
                }));
                assert!(r.is_err(), "{how}: the panic did not reach the caller");
                assert_eq!(
                    Arc::strong_count(&alive),
                    1,
                    "{how}, panic at {panicky}: a command was not dropped"
                );
                assert!(
                    out.yields().is_empty(),
                    "{how}, panic at {panicky}: yields left"
                );
                if how == "reset" {
                    assert_eq!(out.status(), None, "reset left the status");
                }
                for tag in 10..13 {
                    out.push_yield(
                        tag,
                        Held {
                            _alive: Arc::clone(&alive),
                            panics: false,
                        },
                    );
                }
                let tags: Vec<u64> = out.yields_mut().drain().map(|y| y.tag).collect();
                assert_eq!(
                    tags,
                    [10, 11, 12],
                    "{how}, panic at {panicky}: the next yields"
                );
            }
        }
    }

    fn tags<C>(ys: &Yields<C>) -> Vec<u64> {
        ys.iter().map(|y| y.tag).collect()
    }

    fn filled(n: u64) -> Yields<u64> {
        let mut ys = Yields::new();
        (0..n).for_each(|tag| {
            ys.push(Yield {
                tag,
                command: tag * 10,
            })
        });
        ys
    }

    #[test]
    fn two_yields_stay_inline() {
        let ys = filled(2);
        assert!(!ys.spilled());
        assert_eq!(ys.overflow.capacity(), 0, "two yields must not allocate");
        assert_eq!(tags(&ys), [0, 1]);
    }

    #[test]
    fn third_yield_spills_in_order() {
        let ys = filled(3);
        assert!(ys.spilled());
        assert_eq!(tags(&ys), [0, 1, 2]);
        assert_eq!(ys.iter().len(), 3);
        assert_eq!(ys.get(0).map(|y| y.command), Some(0));
        assert_eq!(ys.get(2).map(|y| y.command), Some(20));
        assert!(ys.get(3).is_none());
    }

    #[test]
    fn reset_keeps_overflow_capacity() {
        let mut out = StepOutput::<u64, ()>::new();
        (0..10).for_each(|t| out.push_yield(t, t));
        let cap = out.yields.overflow.capacity();
        assert!(cap >= 8);
        out.reset();
        assert!(out.yields().is_empty());
        assert_eq!(out.yields.overflow.capacity(), cap);
        (0..10).for_each(|t| out.push_yield(t, t));
        assert_eq!(out.yields.overflow.capacity(), cap);
        assert_eq!(tags(out.yields()), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn partially_consumed_drain_empties_the_list() {
        for n in 0..6 {
            let mut ys = filled(n);
            let mut d = ys.drain();
            assert_eq!(d.size_hint(), (n as usize, Some(n as usize)));
            let first = d.next();
            assert_eq!(first.map(|y| y.tag), (n > 0).then_some(0));
            drop(d);
            assert!(ys.is_empty(), "n = {n}");
            assert_eq!(ys.iter().count(), 0);
            ys.push(Yield {
                tag: 99,
                command: 0,
            });
            assert_eq!(tags(&ys), [99]);
        }
    }

    #[test]
    fn drain_drops_unconsumed_yields_once() {
        use std::rc::Rc;
        let token = Rc::new(());
        let mut ys = Yields::new();
        (0..5).for_each(|tag| {
            ys.push(Yield {
                tag,
                command: Rc::clone(&token),
            })
        });
        assert_eq!(Rc::strong_count(&token), 6);
        let mut d = ys.drain();
        drop(d.next());
        drop(d);
        assert_eq!(Rc::strong_count(&token), 1);
        (0..3).for_each(|tag| {
            ys.push(Yield {
                tag,
                command: Rc::clone(&token),
            })
        });
        ys.clear();
        assert_eq!(Rc::strong_count(&token), 1);
    }

    #[test]
    fn take_status_moves_the_result_out() {
        let mut out = StepOutput::<(), Vec<u8>>::new();
        out.set_status(Status::Done(vec![1, 2]));
        assert!(out.status().is_some_and(Status::is_done));
        assert_eq!(out.take_status(), Some(Status::Done(vec![1, 2])));
        assert_eq!(out.status(), None);
    }

    #[test]
    fn debug_lists_the_yields() {
        let mut out = StepOutput::<char, ()>::new();
        out.push_yield(1, 'x');
        let s = format!("{out:?}");
        assert!(s.contains("status: None"), "{s}");
        assert!(s.contains("tag: 1") && s.contains("'x'"), "{s}");
    }

    proptest! {
        /// `Yields` behaves like a `Vec` under any mix of push, drain
        /// (partial) and clear.
        #[test]
        fn yields_match_a_vec(ops in proptest::collection::vec(0u8..8, 0..64)) {
            let mut ys = Yields::new();
            let mut model: Vec<u64> = Vec::new();
            let mut next = 0u64;
            for op in ops {
                match op {
                    0..=4 => {
                        ys.push(Yield { tag: next, command: next });
                        model.push(next);
                        next += 1;
                    }
                    5 => {
                        let got: Vec<u64> = ys.drain().map(|y| y.tag).collect();
                        prop_assert_eq!(got, std::mem::take(&mut model));
                    }
                    6 => {
                        let mut d = ys.drain();
                        let first = d.next().map(|y| y.tag);
                        drop(d);
                        prop_assert_eq!(first, model.first().copied());
                        model.clear();
                    }
                    _ => {
                        ys.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(ys.len(), model.len());
                prop_assert_eq!(ys.spilled(), model.len() > INLINE_YIELDS);
                prop_assert_eq!(tags(&ys), model.clone());
                for (i, tag) in model.iter().enumerate() {
                    prop_assert_eq!(ys.get(i).map(|y| y.tag), Some(*tag));
                }
            }
        }
    }
}
