//! Kafka Connect's windowed statistics, as its `-rate`, `-avg` and `-max` attributes measure
//! them: values are recorded into samples of [`SAMPLE_WINDOW`] (its `metrics.sample.window.ms`),
//! of which the last [`SAMPLES`] (its `metrics.num.samples`) are measured; an older sample is
//! forgotten. A rate divides what the samples hold by the time they span — at least all but
//! one full window, so that a rate measured just after a start is not inflated. An average or a
//! maximum of no values is NaN and a frequency of no outcomes 0, as Kafka Connect's.

use std::time::{Duration, Instant};

/// Kafka Connect's `metrics.sample.window.ms` default.
pub const SAMPLE_WINDOW: Duration = Duration::from_secs(30);
/// Kafka Connect's `metrics.num.samples` default.
pub const SAMPLES: usize = 2;

#[derive(Clone, Copy, Debug)]
struct Sample {
    start: Instant,
    count: u64,
    sum: f64,
    max: f64,
}

impl Sample {
    fn new(start: Instant) -> Self {
        Sample {
            start,
            count: 0,
            sum: 0.0,
            max: f64::NEG_INFINITY,
        }
    }
}

/// The samples of one measured quantity.
#[derive(Debug)]
pub struct Window {
    samples: Vec<Sample>,
    current: usize,
}

impl Window {
    /// No values yet, the first sample starting at `now`.
    pub fn new(now: Instant) -> Self {
        Window {
            samples: vec![Sample::new(now); SAMPLES],
            current: 0,
        }
    }

    /// Record `value` at `now`.
    pub fn record(&mut self, value: f64, now: Instant) {
        self.forget_old(now);
        if now.saturating_duration_since(self.samples[self.current].start) >= SAMPLE_WINDOW {
            self.current = (self.current + 1) % SAMPLES;
            self.samples[self.current] = Sample::new(now);
        }
        let sample = &mut self.samples[self.current];
        sample.count += 1;
        sample.sum += value;
        sample.max = sample.max.max(value);
    }

    /// Samples that started [`SAMPLES`] windows ago or earlier hold nothing any more.
    fn forget_old(&mut self, now: Instant) {
        let expired = SAMPLE_WINDOW * SAMPLES as u32;
        for sample in &mut self.samples {
            if now.saturating_duration_since(sample.start) >= expired {
                *sample = Sample::new(now);
            }
        }
    }

    fn live(&self, now: Instant) -> impl Iterator<Item = &Sample> {
        let expired = SAMPLE_WINDOW * SAMPLES as u32;
        self.samples
            .iter()
            .filter(move |s| now.saturating_duration_since(s.start) < expired)
    }

    /// How many values the live samples hold, and their sum.
    fn held(&self, now: Instant) -> (u64, f64) {
        self.live(now)
            .fold((0, 0.0), |(c, s), x| (c + x.count, s + x.sum))
    }

    /// What the samples hold per second.
    pub fn rate(&self, now: Instant) -> f64 {
        let sum: f64 = self.live(now).map(|s| s.sum).sum();
        let oldest = self.live(now).map(|s| s.start).min().unwrap_or(now);
        let mut elapsed = now.saturating_duration_since(oldest);
        let full = (elapsed.as_nanos() / SAMPLE_WINDOW.as_nanos()) as usize;
        if full < SAMPLES - 1 {
            elapsed += SAMPLE_WINDOW * (SAMPLES - 1 - full) as u32;
        }
        sum / elapsed.as_secs_f64()
    }

    /// The average of the values the samples hold.
    pub fn avg(&self, now: Instant) -> f64 {
        let (count, sum) = self.held(now);
        if count == 0 {
            f64::NAN
        } else {
            sum / count as f64
        }
    }

    /// Of outcomes recorded as 1 (yes) or 0 (no): the fraction that were `yes` (or, `false`, that
    /// were not), as Kafka Connect's `Frequencies` measure its `-percentage` attributes — 0 when
    /// the samples hold none.
    pub fn frequency(&self, now: Instant, yes: bool) -> f64 {
        let (count, sum) = self.held(now);
        if count == 0 {
            return 0.0;
        }
        let yes_share = sum / count as f64;
        if yes {
            yes_share
        } else {
            1.0 - yes_share
        }
    }

    /// The largest value the samples hold.
    pub fn max(&self, now: Instant) -> f64 {
        self.live(now)
            .filter(|s| s.count > 0)
            .map(|s| s.max)
            .reduce(f64::max)
            .unwrap_or(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_of_outcomes_are_of_the_window_and_zero_without_any() {
        let t0 = Instant::now();
        let mut w = Window::new(t0);
        assert_eq!((w.frequency(t0, true), w.frequency(t0, false)), (0.0, 0.0));
        for outcome in [1.0, 1.0, 1.0, 0.0] {
            w.record(outcome, t0);
        }
        assert_eq!(
            (w.frequency(t0, true), w.frequency(t0, false)),
            (0.75, 0.25)
        );
        // Two windows later the outcomes are forgotten.
        let later = t0 + SAMPLE_WINDOW * SAMPLES as u32;
        assert_eq!(
            (w.frequency(later, true), w.frequency(later, false)),
            (0.0, 0.0)
        );
    }

    #[test]
    fn a_rate_spans_at_least_a_window_and_old_samples_are_forgotten() {
        let t0 = Instant::now();
        let mut w = Window::new(t0);
        assert_eq!(w.rate(t0), 0.0);
        assert!(w.avg(t0).is_nan() && w.max(t0).is_nan());
        // 300 records in the first second: over a whole window, not over one second.
        w.record(100.0, t0);
        w.record(200.0, t0 + Duration::from_secs(1));
        let at = t0 + Duration::from_secs(1);
        assert!((w.rate(at) - 300.0 / 31.0).abs() < 1e-9, "{}", w.rate(at));
        assert_eq!((w.avg(at), w.max(at)), (150.0, 200.0));
        // A second window: both samples count, over the time since the first began.
        let later = t0 + Duration::from_secs(45);
        w.record(60.0, later);
        assert!(
            (w.rate(later) - 360.0 / 45.0).abs() < 1e-9,
            "{}",
            w.rate(later)
        );
        assert_eq!(w.max(later), 200.0);
        // Two windows after the first sample began, it is forgotten.
        let much_later = t0 + Duration::from_secs(61);
        assert_eq!(w.max(much_later), 60.0);
        assert!((w.avg(much_later) - 60.0).abs() < 1e-9);
        // Long after everything: nothing left.
        let idle = t0 + Duration::from_secs(200);
        assert_eq!(w.rate(idle), 0.0);
        assert!(w.max(idle).is_nan());
    }
}
