//! The librdkafka call a worker's shared consumer needs and rdkafka does not wrap — Ferry's
//! only `unsafe` code: forwarding a partition's queue into another's, so that a task reads all
//! its partitions from one queue of the shared consumer. Every librdkafka object made here is
//! owned by a guard that destroys it.

use std::ffi::CString;

use ferry_connect::TopicPartition;
use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};

/// Why a call failed: librdkafka's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LibError(String);

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
