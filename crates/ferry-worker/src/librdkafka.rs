//! The librdkafka calls a worker's shared consumer needs and rdkafka does not wrap — the
//! worker's only `unsafe` code: forwarding a partition's queue into another's, so that a task
//! reads all its partitions from one queue of the shared consumer, and taking the messages
//! ready on that queue in one call (`rd_kafka_consume_batch_queue`: one clock read and one poll
//! bookkeeping per batch, where a poll per message did both per message). Every librdkafka
//! object made here is owned by a guard that destroys it.

use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::ptr::NonNull;

use ferry_connect::TopicPartition;
use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{Header, Headers, Message, Timestamp};
use rdkafka::types::RDKafkaErrorCode;

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
    let from = partition_queue(client, from)?;
    let to = to.map(|to| partition_queue(client, to)).transpose()?;
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

/// The high watermark of partition `tp` as `client` last heard it from a fetch (librdkafka's
/// cached value: no request to a broker); `None` before one.
pub fn cached_high_watermark<C: ClientContext>(
    client: &Client<C>,
    tp: &TopicPartition,
) -> Option<i64> {
    let topic = CString::new(tp.topic.as_str()).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the client `client` borrows is live; librdkafka writes the two offsets it is
    // given the addresses of, and reads the topic name only during the call.
    let err = unsafe {
        rd::rd_kafka_get_watermark_offsets(
            client.native_ptr(),
            topic.as_ptr(),
            tp.partition,
            &mut low,
            &mut high,
        )
    };
    (err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
}

/// A handle of the queue of partition `tp` of `client`.
fn partition_queue<C: ClientContext>(
    client: &Client<C>,
    tp: &TopicPartition,
) -> Result<Owned<rd::rd_kafka_queue_t>, LibError> {
    let topic = CString::new(tp.topic.as_str())
        .map_err(|_| LibError(format!("{tp}: the topic has a NUL byte")))?;
    // SAFETY: the client `client` borrows is live; the queue handle returned (a reference of
    // librdkafka's partition queue) is owned by the guard.
    let q = unsafe {
        rd::rd_kafka_queue_get_partition(client.native_ptr(), topic.as_ptr(), tp.partition)
    };
    Owned::new(q, rd::rd_kafka_queue_destroy, &format!("queue of {tp}"))
}

/// A partition's queue of a consumer, whose ready messages are taken in one call. It must be
/// dropped before the consumer is (its owner drops it first).
pub struct BatchQueue {
    queue: Owned<rd::rd_kafka_queue_t>,
}

// SAFETY: librdkafka's queues are locked inside; a handle may be used from any thread.
unsafe impl Send for BatchQueue {}
// SAFETY: as above.
unsafe impl Sync for BatchQueue {}

impl BatchQueue {
    /// The queue of partition `tp` of `client` (with what is forwarded into it).
    pub fn new<C: ClientContext>(
        client: &Client<C>,
        tp: &TopicPartition,
    ) -> Result<Self, LibError> {
        Ok(BatchQueue {
            queue: partition_queue(client, tp)?,
        })
    }

    /// The messages on the queue now, up to `max`, in order, without waiting; a message that
    /// carries an error (the consumer's report) is that error.
    pub fn ready(&self, max: usize) -> Vec<KafkaResult<RawMessage<'_>>> {
        let mut taken: Vec<*mut rd::rd_kafka_message_t> = Vec::with_capacity(max);
        // SAFETY: the queue handle is live; librdkafka writes at most `max` message pointers
        // into the buffer's spare room and returns how many (or -1, none).
        let n =
            unsafe { rd::rd_kafka_consume_batch_queue(self.queue.ptr, 0, taken.as_mut_ptr(), max) };
        // SAFETY: the first `n` pointers were written.
        unsafe { taken.set_len(usize::try_from(n).unwrap_or(0).min(max)) };
        taken
            .into_iter()
            .filter_map(NonNull::new)
            .map(RawMessage::new)
            .collect()
    }
}

/// A consumed message of a [`BatchQueue`], destroyed (its fetch buffer let go) when dropped.
pub struct RawMessage<'q> {
    ptr: NonNull<rd::rd_kafka_message_t>,
    _queue: PhantomData<&'q BatchQueue>,
}

// SAFETY: a consumed message is read-only data librdkafka lets any thread read and destroy.
unsafe impl Send for RawMessage<'_> {}
// SAFETY: as above.
unsafe impl Sync for RawMessage<'_> {}

impl RawMessage<'_> {
    /// The message, or the error it carries (then it is destroyed here).
    fn new(ptr: NonNull<rd::rd_kafka_message_t>) -> KafkaResult<Self> {
        let message = RawMessage {
            ptr,
            _queue: PhantomData,
        };
        match message.native().err {
            rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR => Ok(message),
            rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF => {
                Err(KafkaError::PartitionEOF(message.partition()))
            }
            e => Err(KafkaError::MessageConsumption(RDKafkaErrorCode::from(e))),
        }
    }

    fn native(&self) -> &rd::rd_kafka_message_t {
        // SAFETY: the pointer is librdkafka's live message until `drop`.
        unsafe { self.ptr.as_ref() }
    }
}

impl Drop for RawMessage<'_> {
    fn drop(&mut self) {
        // SAFETY: the message came from librdkafka, and is destroyed once, here.
        unsafe { rd::rd_kafka_message_destroy(self.ptr.as_ptr()) }
    }
}

/// The bytes at `ptr` (`None` when it is null).
///
/// # Safety
/// A non-null `ptr` points at `len` bytes that live as long as the returned slice.
unsafe fn bytes<'a>(ptr: *const std::ffi::c_void, len: usize) -> Option<&'a [u8]> {
    (!ptr.is_null()).then(|| {
        if len == 0 {
            &[][..]
        } else {
            // SAFETY: as the caller promises.
            unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
        }
    })
}

impl Message for RawMessage<'_> {
    type Headers = RawHeaders;

    fn key(&self) -> Option<&[u8]> {
        let m = self.native();
        // SAFETY: the key lives in the message.
        unsafe { bytes(m.key, m.key_len) }
    }

    fn payload(&self) -> Option<&[u8]> {
        let m = self.native();
        // SAFETY: the payload lives in the message.
        unsafe { bytes(m.payload, m.len) }
    }

    unsafe fn payload_mut(&mut self) -> Option<&mut [u8]> {
        let m = self.native();
        (!m.payload.is_null()).then(|| {
            // SAFETY: the payload lives in the message, borrowed mutably with it.
            unsafe { std::slice::from_raw_parts_mut(m.payload.cast::<u8>(), m.len) }
        })
    }

    fn topic(&self) -> &str {
        // SAFETY: the message holds a reference of its topic, whose name is a C string.
        let name = unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(self.native().rkt)) };
        // Kafka's topic names are ASCII (the broker refuses others).
        name.to_str().unwrap_or("")
    }

    fn partition(&self) -> i32 {
        self.native().partition
    }

    fn offset(&self) -> i64 {
        self.native().offset
    }

    fn timestamp(&self) -> Timestamp {
        use rd::rd_kafka_timestamp_type_t as Kind;
        let mut kind = Kind::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: the message is live; librdkafka writes the kind.
        let at = unsafe { rd::rd_kafka_message_timestamp(self.ptr.as_ptr(), &mut kind) };
        match kind {
            _ if at == -1 => Timestamp::NotAvailable,
            Kind::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE => Timestamp::NotAvailable,
            Kind::RD_KAFKA_TIMESTAMP_CREATE_TIME => Timestamp::CreateTime(at),
            Kind::RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME => Timestamp::LogAppendTime(at),
        }
    }

    fn headers(&self) -> Option<&RawHeaders> {
        let mut headers = std::ptr::null_mut();
        // SAFETY: the message is live; librdkafka parses its headers once and keeps them in
        // it, so the pointer lives as long as the message.
        let err = unsafe { rd::rd_kafka_message_headers(self.ptr.as_ptr(), &mut headers) };
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
            return None;
        }
        // SAFETY: `RawHeaders` is an empty type standing for librdkafka's header list at that
        // address, borrowed with the message.
        Some(unsafe { &*(headers as *const RawHeaders) })
    }
}

/// A consumed message's headers: an empty type at the address of librdkafka's header list.
pub struct RawHeaders {
    _opaque: [u8; 0],
}

impl RawHeaders {
    fn native(&self) -> *const rd::rd_kafka_headers_t {
        (self as *const RawHeaders).cast()
    }
}

impl Headers for RawHeaders {
    fn count(&self) -> usize {
        // SAFETY: the header list is live with its message.
        unsafe { rd::rd_kafka_header_cnt(self.native()) }
    }

    fn try_get(&self, idx: usize) -> Option<Header<'_, &[u8]>> {
        let mut name = std::ptr::null();
        let mut value = std::ptr::null();
        let mut size = 0;
        // SAFETY: the header list is live; librdkafka writes pointers into it.
        let err = unsafe {
            rd::rd_kafka_header_get_all(self.native(), idx, &mut name, &mut value, &mut size)
        };
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            return None;
        }
        // SAFETY: the name is a C string in the list.
        let key = unsafe { CStr::from_ptr(name) }
            .to_str()
            // A name that is not UTF-8 (Kafka's clients write UTF-8) keeps its value under the
            // replacement character rather than being dropped.
            .unwrap_or("\u{fffd}");
        Some(Header {
            key,
            // SAFETY: the value lives in the list.
            value: unsafe { bytes(value, size) },
        })
    }
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
