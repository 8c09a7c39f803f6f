//! A linearizability checker in the style of Knossos and Porcupine (Wing & Gong's search with
//! memoization, per key): is there an order of the operations, consistent with their real-time
//! order, in which a sequential model produces every observed output?
//!
//! An operation whose outcome is unknown (a timeout) has no return time and no output: it may
//! have taken effect at any point after its call, or never.

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;

/// A sequential specification.
pub trait Model {
    type State: Clone + Eq + Hash;
    type Input;
    type Output: PartialEq;
    fn init(&self) -> Self::State;
    /// The state after `input`, if the model can produce `output` from `state` (`None` output:
    /// unknown, anything goes).
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Option<Self::State>;
}

/// One recorded operation.
#[derive(Clone, Debug)]
pub struct Op<I, O> {
    pub key: String,
    pub input: I,
    /// When the call was made.
    pub call: u64,
    /// When it returned, or `None` if its outcome is unknown.
    pub ret: Option<u64>,
    /// What it returned (`None` if unknown).
    pub output: Option<O>,
}

const NONE: usize = usize::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    op: usize,
    call: bool,
    time: u64,
}

/// Whether the operations on one key are linearizable.
pub fn check_one<M: Model>(model: &M, ops: &[&Op<M::Input, M::Output>]) -> bool {
    let mut entries: Vec<Entry> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        entries.push(Entry {
            op: i,
            call: true,
            time: op.call,
        });
        entries.push(Entry {
            op: i,
            call: false,
            time: op.ret.unwrap_or(u64::MAX),
        });
    }
    // Calls before returns at the same instant: such operations count as concurrent.
    entries.sort_by_key(|e| (e.time, !e.call, e.op));
    let n = entries.len();
    let sentinel = n;
    let mut next: Vec<usize> = (1..=n).map(|i| if i < n { i } else { NONE }).collect();
    next.push(if n > 0 { 0 } else { NONE });
    let mut prev: Vec<usize> = (0..n)
        .map(|i| if i == 0 { sentinel } else { i - 1 })
        .collect();
    prev.push(NONE);
    let mut return_of = vec![0; ops.len()];
    for (i, e) in entries.iter().enumerate() {
        if !e.call {
            return_of[e.op] = i;
        }
    }
    let lift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, i: usize| {
        next[prev[i]] = next[i];
        if next[i] != NONE {
            prev[next[i]] = prev[i];
        }
    };
    let unlift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, i: usize| {
        next[prev[i]] = i;
        if next[i] != NONE {
            prev[next[i]] = i;
        }
    };
    let mut linearized = vec![false; ops.len()];
    let mut seen: HashSet<(Vec<bool>, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut entry = next[sentinel];
    while next[sentinel] != NONE {
        if entry == NONE {
            return false;
        }
        let e = entries[entry];
        if e.call {
            let op = ops[e.op];
            if let Some(after) = model.step(&state, &op.input, op.output.as_ref()) {
                linearized[e.op] = true;
                if seen.insert((linearized.clone(), after.clone())) {
                    stack.push((entry, state));
                    state = after;
                    lift(&mut next, &mut prev, entry);
                    lift(&mut next, &mut prev, return_of[e.op]);
                    entry = next[sentinel];
                    continue;
                }
                linearized[e.op] = false;
            }
            entry = next[entry];
        } else {
            if e.time == u64::MAX {
                // Only operations of unknown outcome are left: they may never have happened.
                return true;
            }
            // An operation returned before any order could place it: undo the last choice.
            let Some((call, before)) = stack.pop() else {
                return false;
            };
            let op = entries[call].op;
            state = before;
            linearized[op] = false;
            unlift(&mut next, &mut prev, return_of[op]);
            unlift(&mut next, &mut prev, call);
            entry = next[call];
        }
    }
    true
}

/// Check every key on its own (linearizability is compositional); the keys that fail.
pub fn check<M: Model>(model: &M, ops: &[Op<M::Input, M::Output>]) -> Vec<String> {
    type Ops<'a, M> = Vec<&'a Op<<M as Model>::Input, <M as Model>::Output>>;
    let mut by_key: BTreeMap<&str, Ops<M>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    by_key
        .into_iter()
        .filter(|(_, ops)| !check_one(model, ops))
        .map(|(key, _)| key.to_string())
        .collect()
}

/// Connector configs through the management API, as a register per connector name.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConfigRegister;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigInput {
    /// PUT config (create or update).
    Put(String),
    /// POST: create only.
    Create(String),
    Delete,
    /// GET config.
    Get,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOutput {
    Ok,
    AlreadyExists,
    NotFound,
    /// What a GET saw (`None`: not found).
    Value(Option<String>),
}

impl Model for ConfigRegister {
    type State = Option<String>;
    type Input = ConfigInput;
    type Output = ConfigOutput;

    fn init(&self) -> Self::State {
        None
    }

    fn step(
        &self,
        state: &Self::State,
        input: &ConfigInput,
        output: Option<&ConfigOutput>,
    ) -> Option<Self::State> {
        let (after, produced) = match (input, state) {
            (ConfigInput::Put(v), _) => (Some(v.clone()), ConfigOutput::Ok),
            (ConfigInput::Create(v), None) => (Some(v.clone()), ConfigOutput::Ok),
            (ConfigInput::Create(_), Some(_)) => (state.clone(), ConfigOutput::AlreadyExists),
            (ConfigInput::Delete, Some(_)) => (None, ConfigOutput::Ok),
            (ConfigInput::Delete, None) => (None, ConfigOutput::NotFound),
            (ConfigInput::Get, _) => (state.clone(), ConfigOutput::Value(state.clone())),
        };
        match output {
            Some(o) if *o != produced => None,
            _ => Some(after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConfigInput::*;
    use ConfigOutput::*;

    fn op(
        input: ConfigInput,
        call: u64,
        ret: Option<u64>,
        output: Option<ConfigOutput>,
    ) -> Op<ConfigInput, ConfigOutput> {
        Op {
            key: "c".into(),
            input,
            call,
            ret,
            output,
        }
    }

    fn v(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    fn ok(history: Vec<Op<ConfigInput, ConfigOutput>>) -> bool {
        check(&ConfigRegister, &history).is_empty()
    }

    #[test]
    fn sequential_histories() {
        assert!(ok(vec![
            op(Create("a".into()), 0, Some(1), Some(Ok)),
            op(Get, 2, Some(3), Some(Value(v("a")))),
            op(Put("b".into()), 4, Some(5), Some(Ok)),
            op(Get, 6, Some(7), Some(Value(v("b")))),
            op(Delete, 8, Some(9), Some(Ok)),
            op(Get, 10, Some(11), Some(Value(None))),
        ]));
    }

    #[test]
    fn a_read_concurrent_with_a_write_may_see_either() {
        for seen in [v("a"), v("b")] {
            assert!(ok(vec![
                op(Put("a".into()), 0, Some(1), Some(Ok)),
                op(Put("b".into()), 2, Some(6), Some(Ok)),
                op(Get, 3, Some(5), Some(Value(seen))),
            ]));
        }
    }

    #[test]
    fn a_stale_read_fails() {
        assert!(!ok(vec![
            op(Put("a".into()), 0, Some(1), Some(Ok)),
            op(Put("b".into()), 2, Some(3), Some(Ok)),
            op(Get, 4, Some(5), Some(Value(v("a")))),
        ]));
    }

    #[test]
    fn two_successful_creates_of_one_name_fail() {
        assert!(!ok(vec![
            op(Create("a".into()), 0, Some(5), Some(Ok)),
            op(Create("b".into()), 1, Some(4), Some(Ok)),
        ]));
        assert!(ok(vec![
            op(Create("a".into()), 0, Some(5), Some(Ok)),
            op(Create("b".into()), 1, Some(4), Some(AlreadyExists)),
            op(Get, 6, Some(7), Some(Value(v("a")))),
        ]));
    }

    #[test]
    fn a_timed_out_write_may_apply_late_or_never_but_not_flicker() {
        let base = || {
            vec![
                op(Put("a".into()), 0, Some(1), Some(Ok)),
                op(Put("b".into()), 2, None, None),
            ]
        };
        let mut never = base();
        never.push(op(Get, 10, Some(11), Some(Value(v("a")))));
        assert!(ok(never), "it may never have happened");
        let mut late = base();
        late.push(op(Get, 10, Some(11), Some(Value(v("a")))));
        late.push(op(Get, 12, Some(13), Some(Value(v("b")))));
        assert!(ok(late), "it may take effect after a read that missed it");
        let mut flicker = base();
        flicker.push(op(Get, 10, Some(11), Some(Value(v("b")))));
        flicker.push(op(Get, 12, Some(13), Some(Value(v("a")))));
        assert!(!ok(flicker), "once seen, a write cannot be undone");
    }

    #[test]
    fn keys_are_checked_on_their_own() {
        let mut history = vec![
            op(Put("a".into()), 0, Some(1), Some(Ok)),
            op(Get, 2, Some(3), Some(Value(v("a")))),
        ];
        let mut other = op(Get, 0, Some(1), Some(Value(v("zzz"))));
        other.key = "d".into();
        history.push(other);
        assert_eq!(check(&ConfigRegister, &history), vec!["d".to_string()]);
    }
}
