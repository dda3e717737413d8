//! `venue::databento::stream::RecordStream` then `normalize::Normalizer` on arbitrary bytes, fed
//! in chunks whose size the first byte picks, as a DBN stream or (odd first byte) a fragment of
//! the version the second byte picks: nothing may panic, including `RecordRef::get` on a record
//! shorter than its type, or `dbn`'s upgrade of a short v1/v2 record (seeds in
//! `fuzz/seeds/dbn_stream/`, issue 24).

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::venue::databento::normalize::Normalizer;
use tickwire::venue::databento::stream::{Item, RecordStream};

fuzz_target!(|data: &[u8]| {
    let [chunk, version, rest @ ..] = data else {
        return;
    };
    let mut stream = if chunk & 1 == 1 {
        match RecordStream::fragment(1 + version % 3) {
            Ok(stream) => stream,
            Err(_) => return,
        }
    } else {
        RecordStream::new()
    };
    let mut normalizer = Normalizer::new(0);
    for piece in rest.chunks(usize::from(*chunk).max(1)) {
        stream.feed(piece);
        while let Some(item) = stream.next() {
            match item {
                Ok(Item::Metadata(metadata)) => normalizer.on_metadata(&metadata),
                Ok(Item::Record(record)) => {
                    let instrument = record.header().instrument_id;
                    let _ = normalizer.normalize(record, instrument, 0, &mut |_| {});
                }
                Err(_) => return,
            }
        }
    }
    let _ = stream.finish();
});
