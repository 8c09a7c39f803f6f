//! The source task loop: records from `poll` are converted and produced; every
//! `offset.flush.interval.ms` the loop waits until everything sent so far was delivered, then
//! commits the source offsets (with the task's generation) and calls the task's `commit`. A
//! source therefore never skips a record; after a fail-over it may repeat the records produced
//! since its last commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_connect::plugin::TaskFactory;
use ferry_connect::record::source_map_json;
use ferry_connect::task::SourceTaskContext;
use ferry_connect::{ConnectError, Converter, SourceTask};
use ferry_meta::state::{Command, SourceOffset, TargetState};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use tokio::sync::watch;
use tracing::{debug, info, instrument};

use crate::unit::{
    converters, header_converter, lifecycle, stopped, CommittedSourceOffsets, Failure, UnitCtx,
};
use ferry_connect::converter::HeaderConverter;
use ferry_connect::transform::{Applied, Chain};

/// In-flight records before the loop waits for deliveries.
const MAX_IN_FLIGHT: usize = 50_000;

struct SourceLoop {
    ctx: UnitCtx,
    task: Box<dyn SourceTask>,
    producer: FutureProducer,
    key: Box<dyn Converter>,
    value: Box<dyn Converter>,
    headers: Box<dyn HeaderConverter>,
    transforms: Chain,
    in_flight: Vec<DeliveryFuture>,
    /// Latest offset per source partition among the records sent (JSON texts).
    sent: BTreeMap<String, String>,
    committed: BTreeMap<String, String>,
}

impl SourceLoop {
    async fn start(ctx: UnitCtx) -> Result<Self, Failure> {
        let TaskFactory::Source(factory) = ctx.plugin.tasks else {
            return Err(ConnectError::fatal(format!(
                "{} is not a source connector",
                ctx.plugin.class
            ))
            .into());
        };
        let kafka = ctx.kafka()?;
        let (key, value) = converters(&ctx)?;
        let headers = header_converter(&ctx)?;
        let transforms = Chain::from_config(&ctx.connector_config)?;
        let mut config = kafka.client_config();
        config
            .set("enable.idempotence", "true")
            // Records without a key or partition are spread over all partitions.
            .set("sticky.partitioning.linger.ms", "0");
        let producer: FutureProducer = config
            .create()
            .map_err(|e| ConnectError::fatal(format!("cannot create a Kafka producer: {e}")))?;
        let mut task = factory(&ctx.task_config)?;
        ctx.catch_up().await?;
        task.start(SourceTaskContext {
            connector: ctx.name.clone(),
            task: ctx.task.unwrap_or_default(),
            offsets: Arc::new(CommittedSourceOffsets::of(&ctx)),
        })
        .await?;
        info!(task = %ctx.label(), generation = ctx.generation, "source task started");
        Ok(SourceLoop {
            ctx,
            task,
            producer,
            key,
            value,
            headers,
            transforms,
            in_flight: Vec::new(),
            sent: BTreeMap::new(),
            committed: BTreeMap::new(),
        })
    }

    async fn send_batch(&mut self) -> Result<usize, Failure> {
        let records = self.task.poll().await?;
        let count = records.len();
        for mut record in records {
            if self.transforms.apply(&mut record)? == Applied::Drop {
                // Filtered out: nothing to produce, but the source has moved past it.
                self.sent.insert(
                    source_map_json(&record.source_partition),
                    source_map_json(&record.source_offset),
                );
                continue;
            }
            let key = self
                .key
                .encode(&record.topic, record.key_schema.as_ref(), &record.key)?;
            let value =
                self.value
                    .encode(&record.topic, record.value_schema.as_ref(), &record.value)?;
            let mut headers = OwnedHeaders::new();
            for h in &record.headers {
                let bytes =
                    self.headers
                        .encode(&record.topic, &h.key, h.schema.as_ref(), &h.value)?;
                headers = headers.insert(KafkaHeader {
                    key: &h.key,
                    value: bytes.as_deref(),
                });
            }
            loop {
                let mut out: FutureRecord<'_, [u8], [u8]> =
                    FutureRecord::to(&record.topic).headers(headers.clone());
                if let Some(k) = key.as_deref() {
                    out = out.key(k);
                }
                if let Some(v) = value.as_deref() {
                    out = out.payload(v);
                }
                if let Some(p) = record.partition {
                    out = out.partition(p);
                }
                if let Some(ts) = record.timestamp {
                    out = out.timestamp(ts);
                }
                match self.producer.send_result(out) {
                    Ok(delivery) => {
                        self.in_flight.push(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        self.await_deliveries().await?;
                    }
                    Err((e, _)) => {
                        return Err(ConnectError::fatal(format!(
                            "cannot produce to {}: {e}",
                            record.topic
                        ))
                        .into())
                    }
                }
            }
            self.sent.insert(
                source_map_json(&record.source_partition),
                source_map_json(&record.source_offset),
            );
            if self.in_flight.len() >= MAX_IN_FLIGHT {
                self.await_deliveries().await?;
            }
        }
        Ok(count)
    }

    /// Wait until every record sent so far is delivered (or fail the task).
    async fn await_deliveries(&mut self) -> Result<(), Failure> {
        for delivery in self.in_flight.drain(..) {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => {
                    return Err(
                        ConnectError::fatal(format!("a record was not delivered: {e}")).into(),
                    )
                }
                Err(_) => {
                    return Err(ConnectError::fatal(
                        "the producer dropped a record before delivery",
                    )
                    .into())
                }
            }
        }
        Ok(())
    }

    /// Commit the offsets of everything delivered, with this task's generation.
    async fn commit(&mut self) -> Result<(), Failure> {
        self.await_deliveries().await?;
        let offsets: Vec<SourceOffset> = self
            .sent
            .iter()
            .filter(|(p, o)| self.committed.get(*p) != Some(*o))
            .map(|(p, o)| SourceOffset {
                partition: p.clone(),
                offset: Some(o.clone()),
            })
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        self.ctx
            .commit(Command::CommitSourceOffsets {
                name: self.ctx.name.clone(),
                task: self.ctx.task.unwrap_or_default(),
                generation: self.ctx.generation,
                offsets,
            })
            .await?;
        self.committed = self.sent.clone();
        self.task.commit().await?;
        debug!(task = %self.ctx.label(), "source offsets committed");
        Ok(())
    }

    async fn run(
        &mut self,
        control: &mut watch::Receiver<TargetState>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), Failure> {
        let interval = self.ctx.settings.offset_flush_interval;
        let mut last_commit = tokio::time::Instant::now();
        let mut reported: Option<TargetState> = None;
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            let target = *control.borrow_and_update();
            if reported != Some(target) {
                if target == TargetState::Stopped {
                    return Ok(());
                }
                self.ctx.report_target(target).await?;
                reported = Some(target);
            }
            if last_commit.elapsed() >= interval {
                self.commit().await?;
                last_commit = tokio::time::Instant::now();
            }
            if target == TargetState::Paused {
                tokio::select! {
                    _ = stopped(stop) => return Ok(()),
                    changed = control.changed() => if changed.is_err() { return Ok(()) },
                    _ = tokio::time::sleep(interval) => {}
                }
                continue;
            }
            // `poll` returns within about a second; stop and pause are seen between polls.
            self.send_batch().await?;
        }
    }
}

/// One session of a source task: from start to a stop or a STOPPED target (`Ok`), fencing or
/// a failure. The task is stopped in every case.
async fn session(
    ctx: UnitCtx,
    mut control: watch::Receiver<TargetState>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let mut source = SourceLoop::start(ctx).await?;
    let outcome = match source.run(&mut control, &mut stop).await {
        Ok(()) => source.commit().await,
        other => other,
    };
    let stopped = source.task.stop().await;
    outcome?;
    stopped?;
    Ok(())
}

/// Run a source task until it is stopped, fenced or fails.
#[instrument(skip_all, fields(connector = %ctx.name, task = ctx.task))]
pub async fn run(ctx: UnitCtx, control: watch::Receiver<TargetState>, stop: watch::Receiver<bool>) {
    lifecycle(ctx, control, stop, session).await;
    debug!("source task finished");
}
