//! Element types and the sealed trait for types that may view buffer memory.

/// Element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum DType {
    /// 32-bit float.
    F32 = 1,
    /// 16-bit IEEE float.
    F16 = 2,
    /// bfloat16.
    BF16 = 3,
    /// 32-bit signed integer.
    I32 = 4,
    /// 32-bit unsigned integer.
    U32 = 5,
    /// 64-bit signed integer.
    I64 = 6,
    /// Boolean (one byte).
    Bool = 7,
    /// 8-bit signed integer.
    I8 = 8,
    /// 8-bit unsigned integer.
    U8 = 9,
    /// FP8 E4M3 "fn" (finite, max 448): a storage type, viewed as `u8` bytes.
    F8E4M3 = 10,
    /// FP8 E5M2 (IEEE-like, max 57344): a storage type, viewed as `u8` bytes.
    F8E5M2 = 11,
}

impl DType {
    const ALL: [DType; 11] = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::I64,
                              DType::Bool, DType::I8, DType::U8, DType::F8E4M3, DType::F8E5M2];

    /// The dtype of a `metile_dtype` value; `None` for one this crate does not know.
    pub fn from_raw(raw: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| *d as i32 == raw)
    }

    /// Bytes per element (`metile_dtype_size`).
    pub fn size(self) -> usize {
        unsafe { crate::sys::metile_dtype_size(self as i32) }
    }

    /// "f32", "bf16", ... (`metile_dtype_name`).
    pub fn name(self) -> &'static str {
        // Static storage in the library.
        unsafe { std::ffi::CStr::from_ptr(crate::sys::metile_dtype_name(self as i32)) }
            .to_str()
            .unwrap_or("invalid")
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Plain element types whose buffers can be viewed as Rust slices.
///
/// # Safety
/// Every bit pattern of the buffer's bytes must be a valid value of the type (no padding, no
/// references, no niches). The trait is sealed: it cannot be implemented outside this crate.
pub unsafe trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The metile dtype of this Rust type.
    const DTYPE: DType;
}
macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        unsafe impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}
element!(f32 => F32, i32 => I32, u32 => U32, i64 => I64, i8 => I8, u8 => U8);
