//! The time a task spends in each state since its first report, as Kafka Connect measures it
//! for its connector-task-metrics `running-ratio` and `pause-ratio`: the time in a state over
//! the time since the first state, both up to now.

use std::time::{Duration, Instant};

use ferry_meta::state::RunState;

/// A task's states over time.
#[derive(Debug, Default)]
pub struct StateTime {
    /// The state it is in, since when.
    current: Option<(RunState, Instant)>,
    /// The time spent in each state it left.
    spent: Vec<(RunState, Duration)>,
}

impl StateTime {
    /// The task is in `state` from `now` (the same state again changes nothing).
    pub fn enter(&mut self, state: RunState, now: Instant) {
        if let Some((was, since)) = self.current {
            if was == state {
                return;
            }
            let time = now.saturating_duration_since(since);
            match self.spent.iter_mut().find(|(s, _)| *s == was) {
                Some((_, total)) => *total += time,
                None => self.spent.push((was, time)),
            }
        }
        self.current = Some((state, now));
    }

    /// The fraction of the time since the first state that was spent in `state` (0 before any).
    pub fn ratio(&self, state: RunState, now: Instant) -> f64 {
        let Some((current, since)) = self.current else {
            return 0.0;
        };
        let now_in = now.saturating_duration_since(since);
        let total: Duration = self.spent.iter().map(|(_, d)| *d).sum::<Duration>() + now_in;
        let mut part: Duration = self
            .spent
            .iter()
            .filter(|(s, _)| *s == state)
            .map(|(_, d)| *d)
            .sum();
        if current == state {
            part += now_in;
        }
        if total.is_zero() {
            return if current == state { 1.0 } else { 0.0 };
        }
        part.as_secs_f64() / total.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_is_the_time_in_a_state_over_the_time_since_the_first() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut time = StateTime::default();
        assert_eq!(time.ratio(RunState::Running, t0), 0.0);
        time.enter(RunState::Running, t0);
        assert_eq!(time.ratio(RunState::Running, t0), 1.0);
        assert_eq!(time.ratio(RunState::Running, at(10)), 1.0);
        // Running 10 s, paused 10 s, running again (a repeated report changes nothing).
        time.enter(RunState::Paused, at(10));
        time.enter(RunState::Paused, at(15));
        time.enter(RunState::Running, at(20));
        assert_eq!(time.ratio(RunState::Paused, at(20)), 0.5);
        assert_eq!(time.ratio(RunState::Running, at(40)), 0.75);
        assert_eq!(time.ratio(RunState::Paused, at(40)), 0.25);
        assert_eq!(time.ratio(RunState::Failed, at(40)), 0.0);
    }
}
