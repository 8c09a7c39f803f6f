//! The librdkafka calls a worker's shared consumer needs and rdkafka does not wrap — Ferry's
//! only `unsafe` code:
//! - a consumer group's committed offsets, read and written through Kafka's Admin API
//!   (ListConsumerGroupOffsets, AlterConsumerGroupOffsets): a shared consumer serves the tasks
//!   of many connectors, so it cannot commit as each one's `connect-<name>` group; the Admin
//!   API commits for a group without being its member, as `kafka-consumer-groups
//!   --reset-offsets` does;
//! - forwarding a partition's queue into another's, so that a task reads all its partitions
//!   from one queue of the shared consumer.
//!
//! Every librdkafka object made here is owned by a guard that destroys it, and a result is
//! copied out before its event is destroyed.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, CStr, CString};
use std::time::Duration;

use ferry_connect::TopicPartition;
use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

/// Why a call failed: librdkafka's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LibError(String);

impl LibError {
    /// An error in these words.
    pub fn new(words: impl Into<String>) -> Self {
        LibError(words.into())
    }
}

/// The offsets `group` has committed for `partitions`; a partition without one is absent.
/// Blocks for up to `timeout`: call it off the async runtime.
pub fn list<C: ClientContext>(
    client: &Client<C>,
    group: &str,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<BTreeMap<TopicPartition, i64>, LibError> {
    let mut asked = TopicPartitionList::new();
    for tp in partitions {
        asked.add_partition(&tp.topic, tp.partition);
    }
    let answer = call(client, Call::List, group, &asked, timeout)?;
    Ok(answer.into_iter().filter(|(_, o)| *o >= 0).collect())
}

/// Commit `offsets` (the next offset to consume, per partition) for `group`. Blocks for up to
/// `timeout`: call it off the async runtime. Refused by the broker while the group has active
/// members (a Kafka Connect worker still running the connector).
pub fn alter<C: ClientContext>(
    client: &Client<C>,
    group: &str,
    offsets: &HashMap<TopicPartition, i64>,
    timeout: Duration,
) -> Result<(), LibError> {
    let mut list = TopicPartitionList::new();
    for (tp, offset) in offsets {
        list.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*offset))
            .map_err(|e| LibError(format!("offset {offset} of {tp}: {e}")))?;
    }
    call(client, Call::Alter, group, &list, timeout).map(drop)
}

/// Forward the queue of partition `from` of `client` into the queue of partition `to`
/// (`None`: stop forwarding it, its messages stay on its own queue). Each partition's fetch
/// bound (`queued.max.messages.kbytes`) then applies to the queue it is forwarded to.
pub fn forward<C: ClientContext>(
    client: &Client<C>,
    from: &TopicPartition,
    to: Option<&TopicPartition>,
) -> Result<(), LibError> {
    let rk = client.native_ptr();
    let queue = |tp: &TopicPartition| -> Result<Owned<rd::rd_kafka_queue_t>, LibError> {
        let topic = CString::new(tp.topic.as_str())
            .map_err(|_| LibError(format!("{tp}: the topic has a NUL byte")))?;
        // SAFETY: `rk` is the live client `client` borrows; the queue handle returned (a
        // reference of librdkafka's partition queue) is owned by the guard.
        let q = unsafe { rd::rd_kafka_queue_get_partition(rk, topic.as_ptr(), tp.partition) };
        Owned::new(q, rd::rd_kafka_queue_destroy, &format!("queue of {tp}"))
    };
    let from = queue(from)?;
    let to = to.map(queue).transpose()?;
    // SAFETY: both handles are live for the call; librdkafka takes its own reference of the
    // destination.
    unsafe {
        rd::rd_kafka_queue_forward(
            from.ptr,
            to.as_ref().map_or(std::ptr::null_mut(), |q| q.ptr),
        )
    };
    Ok(())
}

#[derive(Clone, Copy)]
enum Call {
    List,
    Alter,
}

/// Owns a librdkafka object and destroys it when dropped.
struct Owned<T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    fn new(
        ptr: *mut T,
        destroy: unsafe extern "C" fn(*mut T),
        what: &str,
    ) -> Result<Self, LibError> {
        if ptr.is_null() {
            return Err(LibError(format!("librdkafka made no {what}")));
        }
        Ok(Owned { ptr, destroy })
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` was made by librdkafka, is not null, and is destroyed once, here.
        unsafe { (self.destroy)(self.ptr) }
    }
}

/// librdkafka's words for an error code.
fn describe(err: RDKafkaRespErr) -> String {
    // SAFETY: rd_kafka_err2str returns a static string for every code.
    unsafe { text(rd::rd_kafka_err2str(err)) }
}

/// A C string of librdkafka's, copied.
///
/// # Safety
/// `s` is null or a valid NUL-terminated string that lives for the call.
unsafe fn text(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

/// One Admin API call for one group, waited for: the partitions and offsets of its answer.
fn call<C: ClientContext>(
    client: &Client<C>,
    call: Call,
    group: &str,
    partitions: &TopicPartitionList,
    timeout: Duration,
) -> Result<Vec<(TopicPartition, i64)>, LibError> {
    let fail = |what: String| LibError(format!("group {group}: {what}"));
    let group_c = CString::new(group).map_err(|_| fail("the name has a NUL byte".into()))?;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let rk = client.native_ptr();
    // SAFETY: `rk` is the live client `client` borrows for the whole call; every object made
    // here is owned by an `Owned` guard; librdkafka copies the request before the call returns
    // (so it may be destroyed at once); the answer is read before its event is destroyed.
    unsafe {
        let queue = Owned::new(
            rd::rd_kafka_queue_new(rk),
            rd::rd_kafka_queue_destroy,
            "queue",
        )?;
        let options = Owned::new(
            rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ANY),
            rd::rd_kafka_AdminOptions_destroy,
            "admin options",
        )?;
        let mut errstr = [0 as c_char; 256];
        let set = rd::rd_kafka_AdminOptions_set_request_timeout(
            options.ptr,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        if set != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(fail(text(errstr.as_ptr())));
        }
        match call {
            Call::List => {
                let request = Owned::new(
                    rd::rd_kafka_ListConsumerGroupOffsets_new(group_c.as_ptr(), partitions.ptr()),
                    rd::rd_kafka_ListConsumerGroupOffsets_destroy,
                    "request",
                )?;
                let mut requests = [request.ptr];
                rd::rd_kafka_ListConsumerGroupOffsets(
                    rk,
                    requests.as_mut_ptr(),
                    1,
                    options.ptr,
                    queue.ptr,
                );
            }
            Call::Alter => {
                let request = Owned::new(
                    rd::rd_kafka_AlterConsumerGroupOffsets_new(group_c.as_ptr(), partitions.ptr()),
                    rd::rd_kafka_AlterConsumerGroupOffsets_destroy,
                    "request",
                )?;
                let mut requests = [request.ptr];
                rd::rd_kafka_AlterConsumerGroupOffsets(
                    rk,
                    requests.as_mut_ptr(),
                    1,
                    options.ptr,
                    queue.ptr,
                );
            }
        }
        // The request times out by itself; the margin is for its answer to be queued.
        let event = rd::rd_kafka_queue_poll(queue.ptr, timeout_ms.saturating_add(5_000));
        let event = Owned::new(event, rd::rd_kafka_event_destroy, "answer in time")
            .map_err(|e| fail(e.0))?;
        let err = rd::rd_kafka_event_error(event.ptr);
        if err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(fail(text(rd::rd_kafka_event_error_string(event.ptr))));
        }
        let mut count = 0usize;
        let groups = match call {
            Call::List => {
                let result = rd::rd_kafka_event_ListConsumerGroupOffsets_result(event.ptr);
                if result.is_null() {
                    return Err(fail("an answer of another kind".into()));
                }
                rd::rd_kafka_ListConsumerGroupOffsets_result_groups(result, &mut count)
            }
            Call::Alter => {
                let result = rd::rd_kafka_event_AlterConsumerGroupOffsets_result(event.ptr);
                if result.is_null() {
                    return Err(fail("an answer of another kind".into()));
                }
                rd::rd_kafka_AlterConsumerGroupOffsets_result_groups(result, &mut count)
            }
        };
        if groups.is_null() || count != 1 {
            return Err(fail(format!("an answer for {count} groups, not one")));
        }
        let answer = *groups;
        let error = rd::rd_kafka_group_result_error(answer);
        if !error.is_null() {
            return Err(fail(text(rd::rd_kafka_error_string(error))));
        }
        let list = rd::rd_kafka_group_result_partitions(answer);
        if list.is_null() {
            return Ok(Vec::new());
        }
        let list = &*list;
        let elems: &[rd::rd_kafka_topic_partition_t] = if list.cnt <= 0 || list.elems.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(list.elems, list.cnt as usize)
        };
        let mut out = Vec::with_capacity(elems.len());
        for e in elems {
            let tp = TopicPartition::new(text(e.topic), e.partition);
            if e.err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(fail(format!("{tp}: {}", describe(e.err))));
            }
            out.push((tp, e.offset));
        }
        Ok(out)
    }
}
