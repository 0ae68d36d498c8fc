//! DLPack tensors: the layout every producer and consumer shares (DLPack's ABI), in C memory.
use std::fmt;
use std::os::raw::c_void;

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device_type: i32,
    device_id: i32,
    ndim: i32,
    code: u8,
    bits: u8,
    lanes: u16,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    major: u32,
    minor: u32,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    tensor: DLTensor,
}

/// A DLPack tensor this program owns: a `DLManagedTensor` (legacy ABI) or, when
/// [`versioned`](DLPack::versioned), a `DLManagedTensorVersioned` (1.x). Dropping it runs its
/// deleter; [`into_raw`](DLPack::into_raw) hands it to a consumer instead, and
/// [`Device::from_dlpack`](crate::Device::from_dlpack) imports it.
pub struct DLPack {
    ptr: *mut c_void,
    versioned: bool,
}

unsafe impl Send for DLPack {}

/// The fields of a DLPack tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DLPackInfo {
    /// The data pointer, as an address.
    pub data: usize,
    /// kDLCPU = 1, kDLCUDA = 2, ...
    pub device_type: i32,
    /// The device ordinal.
    pub device_id: i32,
    /// The size of each dimension.
    pub shape: Vec<i64>,
    /// `None` for compact row-major.
    pub strides: Option<Vec<i64>>,
    /// kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for scalars).
    pub lanes: u16,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
    /// (major, minor) for versioned tensors.
    pub version: Option<(u32, u32)>,
    /// Versioned tensors' flags: 1 read-only, 2 is-copied.
    pub flags: u64,
}

impl DLPack {
    /// Takes ownership of a tensor another library produced.
    ///
    /// # Safety
    /// `ptr` points to a live `DLManagedTensor` (or, with `versioned`, `DLManagedTensorVersioned`)
    /// that nothing else will delete.
    pub unsafe fn from_raw(ptr: *mut c_void, versioned: bool) -> DLPack {
        DLPack { ptr, versioned }
    }

    /// Gives up ownership: the pointer for a consumer, which then runs the deleter.
    pub fn into_raw(self) -> *mut c_void {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }

    /// Whether this is a `DLManagedTensorVersioned` (1.x ABI), else a legacy `DLManagedTensor`.
    pub fn versioned(&self) -> bool {
        self.versioned
    }

    fn tensor(&self) -> &DLTensor {
        unsafe {
            if self.versioned {
                &(*(self.ptr as *const DLManagedTensorVersioned)).tensor
            } else {
                &(*(self.ptr as *const DLManagedTensor)).tensor
            }
        }
    }

    /// Reads the tensor's fields.
    pub fn info(&self) -> DLPackInfo {
        let t = self.tensor();
        let ndim = t.ndim.max(0) as usize;
        let read = |p: *mut i64| unsafe { std::slice::from_raw_parts(p, ndim).to_vec() };
        let (version, flags) = if self.versioned {
            let v = unsafe { &*(self.ptr as *const DLManagedTensorVersioned) };
            (Some((v.major, v.minor)), v.flags)
        } else {
            (None, 0)
        };
        DLPackInfo {
            data: t.data as usize,
            device_type: t.device_type,
            device_id: t.device_id,
            shape: if ndim == 0 { Vec::new() } else { read(t.shape) },
            strides: if ndim == 0 || t.strides.is_null() { None } else { Some(read(t.strides)) },
            code: t.code,
            bits: t.bits,
            lanes: t.lanes,
            byte_offset: t.byte_offset,
            version,
            flags,
        }
    }
}

impl Drop for DLPack {
    fn drop(&mut self) {
        unsafe {
            if self.versioned {
                let v = self.ptr as *mut DLManagedTensorVersioned;
                if let Some(d) = (*v).deleter {
                    d(v);
                }
            } else {
                let m = self.ptr as *mut DLManagedTensor;
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        }
    }
}

impl fmt::Debug for DLPack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DLPack").field("versioned", &self.versioned).field("info", &self.info()).finish()
    }
}
