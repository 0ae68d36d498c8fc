/** \file standin_objc.h
 * The test stand-in for the Objective-C runtime (libmetile_standin_objc.so): classes with
 * method tables, interned selectors, reference counting, autorelease pools, and objc_msgSend /
 * objc_msgSend_stret as assembly trampolines (msgsend_x86_64.S) that find the method by the
 * receiver's class and selector and jump to it with the caller's registers and stack intact.
 * Methods are plain C functions with the prototypes of Apple's headers, so a message sent with
 * the wrong prototype reads wrong values. Test-only: never linked into libmetile.
 */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct standin_class standin_class;

/** Every stand-in object starts with this header (isa first, as in Objective-C). */
typedef struct standin_object {
  standin_class* isa;
  long refs;                                 // atomic; starts at 1
  void (*destroy)(struct standin_object*);  // frees the object when refs reaches 0
} standin_object;

/** objc_getClass, as the real runtime exports it. */
void* objc_getClass(const char* name);

/** Defines (or returns) the class `name`, a subclass of `super_name` (NULL: a root class). */
standin_class* standin_objc_define_class(const char* name, const char* super_name);
/** Adds an instance method (class_method 0) or a class method (1). */
void standin_objc_add_method(standin_class* cls, const char* selector, void* imp, int class_method);
/** Initializes a new object's header: class, one reference, destructor. */
void standin_objc_init_object(standin_object* o, standin_class* cls,
                              void (*destroy)(standin_object*));
void* standin_objc_retain(void* o);
void standin_objc_release(void* o);
/** Adds `o` to the innermost autorelease pool of this thread and returns it. */
void* standin_objc_autorelease(void* o);

/** Objects alive now (created, not yet destroyed). */
long standin_objc_live_objects(void);
/** Objects autoreleased while no pool was in place (real Cocoa leaks those). */
long standin_objc_unpooled_autoreleases(void);

/** Used by the trampolines: the method of class `isa` for `sel`; aborts when there is none. */
void* standin_objc_lookup(standin_class* isa, const void* sel);

#ifdef __cplusplus
}
#endif
