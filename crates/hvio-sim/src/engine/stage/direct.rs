//! The direct host path: each guest request goes to the host scheduler as
//! it leaves the ring (QEMU's virtio-blk with `cache=none`, `aio=native`).

use super::*;

pub(crate) struct Direct;

impl HostPath for Direct {
    #[inline]
    fn arrive(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        let rq = cx.host_request(slot);
        cx.send(rq)
    }

    #[inline]
    fn done(&mut self, _slot: u32, _cx: &mut PathCx) -> Result<()> {
        Ok(())
    }

    fn held(&self) -> usize {
        0
    }
}
