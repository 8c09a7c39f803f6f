//! The applied state's lock, taken at most once per thread.
//!
//! The applied state sits behind one `std` [`RwLock`]: the state machine writes it when it
//! applies entries, every reader (API, scheduler, runtime, metrics) reads it. A `std` lock
//! makes new readers wait behind a waiting writer, so a thread that holds a read and asks for a
//! second one waits for the writer, which waits for the first read: both of the runtime's
//! threads stop, and the node with them (it neither serves Raft nor obeys SIGTERM). Two reads in
//! one expression are enough — `f(s.read().a, s.read().b)` keeps the first guard until the end
//! of the statement — and it freezes only when an apply happens to come between them.
//!
//! So every guard of the applied state is registered, per thread, while it lives, and asking
//! for the lock again on a thread that holds it panics at once, naming the rule: the mistake
//! shows in the first test that runs the code, not in one run of a thousand. The guards are
//! `!Send`, so the compiler already refuses one held across an `.await` in a spawned task.
//!
//! Lock order: the applied state's lock is a leaf. While a guard lives, its holder takes no
//! other lock and waits for nothing; the state machine sends its "applied" notice after it has
//! released its write.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::sm::AppliedState;

thread_local! {
    /// The applied-state locks this thread holds (by address: a process may host several nodes).
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// What a thread that asks for the applied state while it holds it panics with (the harness
/// looks for it in every node's log).
pub const HELD_TWICE: &str = "this thread asked for the applied state while it already holds \
    it: that deadlocks as soon as an apply waits between the two (read the state once, and drop \
    the guard before anything that reads it again)";

/// The shared, locked applied state of one node.
#[derive(Clone, Default)]
pub(crate) struct Applied(Arc<RwLock<AppliedState>>);

impl Applied {
    pub(crate) fn new(state: AppliedState) -> Self {
        Applied(Arc::new(RwLock::new(state)))
    }

    /// Read it. Panics if this thread already holds it (see the module's documentation).
    pub(crate) fn read(&self) -> StateGuard<'_> {
        let held = Held::take(self);
        let guard = self.0.read().unwrap_or_else(|p| p.into_inner());
        StateGuard { guard, _held: held }
    }

    /// Write it. Panics if this thread already holds it.
    pub(crate) fn write(&self) -> StateWriteGuard<'_> {
        let held = Held::take(self);
        let guard = self.0.write().unwrap_or_else(|p| p.into_inner());
        StateWriteGuard { guard, _held: held }
    }

    fn key(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

/// This thread's hold of one node's applied-state lock, from before it is asked for until its
/// guard is dropped.
struct Held(usize);

impl Held {
    fn take(applied: &Applied) -> Held {
        let key = applied.key();
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            assert!(!held.contains(&key), "{HELD_TWICE}");
            held.push(key);
        });
        Held(key)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|k| *k == self.0) {
                held.swap_remove(at);
            }
        });
    }
}

/// A read of the applied state. Drop it before reading the state again or awaiting anything.
pub struct StateGuard<'a> {
    guard: RwLockReadGuard<'a, AppliedState>,
    _held: Held,
}

impl Deref for StateGuard<'_> {
    type Target = AppliedState;

    fn deref(&self) -> &AppliedState {
        &self.guard
    }
}

/// The state machine's write of the applied state.
pub(crate) struct StateWriteGuard<'a> {
    guard: RwLockWriteGuard<'a, AppliedState>,
    _held: Held,
}

impl Deref for StateWriteGuard<'_> {
    type Target = AppliedState;

    fn deref(&self) -> &AppliedState {
        &self.guard
    }
}

impl DerefMut for StateWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut AppliedState {
        &mut self.guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_read_after_another_and_reads_of_two_nodes_are_fine() {
        let a = Applied::default();
        let b = Applied::default();
        drop(a.read());
        let first = a.read();
        let other = b.read();
        assert_eq!(first.last_applied, other.last_applied);
        drop(first);
        drop(a.write());
    }

    #[test]
    #[should_panic(expected = "already holds it")]
    fn a_second_read_on_the_thread_that_holds_one_panics_instead_of_deadlocking() {
        let a = Applied::default();
        // As `cluster_status` once did: two reads in one struct expression.
        let _both = (a.read().last_applied, a.read().last_applied);
    }

    #[test]
    #[should_panic(expected = "already holds it")]
    fn a_write_while_this_thread_reads_panics() {
        let a = Applied::default();
        let _read = a.read();
        let _write = a.write();
    }

    #[test]
    fn a_panic_while_holding_releases_the_hold() {
        let a = Applied::default();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _read = a.read();
            panic!("boom");
        }));
        assert!(caught.is_err());
        drop(a.write());
    }

    #[test]
    fn other_threads_read_while_one_holds() {
        let a = Applied::default();
        let _read = a.read();
        let b = a.clone();
        let seen = std::thread::spawn(move || b.read().last_applied)
            .join()
            .expect("the other thread reads");
        assert_eq!(seen, None);
    }
}
