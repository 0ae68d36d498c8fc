// The stand-in Objective-C runtime (see standin_objc.h). All state is leaked on purpose: the
// library that uses it may send messages from static destructors at process exit.
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "standin_objc.h"

struct standin_class {
  standin_class* isa;  // the metaclass (class methods); a class is an object too
  standin_class* super;
  std::string name;
  std::unordered_map<const void*, void*> methods;
};

namespace {

struct Runtime {
  std::mutex mu;
  std::unordered_set<std::string> selectors;
  std::map<std::string, standin_class*> classes;
};

Runtime& runtime() {
  static Runtime* r = new Runtime();
  return *r;
}

std::atomic<long> live{0};
std::atomic<long> unpooled{0};

void free_pools(void* pools) { delete static_cast<std::vector<void*>*>(pools); }

/**
 * This thread's autorelease pools, in thread-specific data as libobjc keeps them, not in a C++
 * thread_local: exit() runs the thread_local destructors before the static ones, and the library
 * sends messages in pools from static destructors (the device cache releasing its devices), so a
 * thread_local vector was written after exit had freed it. exit() leaves the main thread's
 * thread-specific data alone; other threads free theirs when they end, after their
 * thread_local destructors.
 */
std::vector<void*>& autoreleased() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    if (pthread_key_create(&k, free_pools) != 0) {
      std::fprintf(stderr, "stand-in objc: pthread_key_create failed\n");
      std::abort();
    }
    return k;
  }();
  auto* pools = static_cast<std::vector<void*>*>(pthread_getspecific(key));
  if (pools == nullptr) {
    pools = new std::vector<void*>();
    pthread_setspecific(key, pools);
  }
  return *pools;
}

std::atomic_ref<long> refs_of(void* o) { return std::atomic_ref<long>(static_cast<standin_object*>(o)->refs); }

}  // namespace

extern "C" {

const void* sel_registerName(const char* name) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.selectors.insert(name).first->c_str();
}

void* objc_getClass(const char* name) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.classes.find(name);
  return it == r.classes.end() ? nullptr : it->second;
}

standin_class* standin_objc_define_class(const char* name, const char* super_name) {
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.classes.find(name);
  if (it != r.classes.end()) return it->second;
  standin_class* super = nullptr;
  if (super_name != nullptr) {
    auto s = r.classes.find(super_name);
    if (s == r.classes.end()) {
      std::fprintf(stderr, "stand-in objc: superclass %s of %s is not defined\n", super_name, name);
      std::abort();
    }
    super = s->second;
  }
  auto* meta = new standin_class{nullptr, super ? super->isa : nullptr, std::string(name) + " class", {}};
  meta->isa = meta;
  auto* cls = new standin_class{meta, super, name, {}};
  r.classes[name] = cls;
  return cls;
}

void standin_objc_add_method(standin_class* cls, const char* selector, void* imp, int class_method) {
  const void* sel = sel_registerName(selector);
  Runtime& r = runtime();
  std::lock_guard<std::mutex> lock(r.mu);
  (class_method ? cls->isa : cls)->methods[sel] = imp;
}

void* standin_objc_lookup(standin_class* isa, const void* sel) {
  Runtime& r = runtime();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (standin_class* c = isa; c != nullptr; c = c->super) {
      auto it = c->methods.find(sel);
      if (it != c->methods.end()) return it->second;
    }
  }
  // As the real runtime does (via an exception that is never caught here): stop.
  std::fprintf(stderr, "stand-in objc: %s does not respond to the selector %s\n",
               isa->name.c_str(), static_cast<const char*>(sel));
  std::abort();
}

void standin_objc_init_object(standin_object* o, standin_class* cls,
                              void (*destroy)(standin_object*)) {
  o->isa = cls;
  o->refs = 1;
  o->destroy = destroy;
  live.fetch_add(1);
}

void* standin_objc_retain(void* o) {
  if (o != nullptr) refs_of(o).fetch_add(1);
  return o;
}

void standin_objc_release(void* o) {
  if (o == nullptr) return;
  long before = refs_of(o).fetch_sub(1);
  if (before == 1) {
    live.fetch_sub(1);
    auto* obj = static_cast<standin_object*>(o);
    obj->destroy(obj);
  } else if (before < 1) {
    std::fprintf(stderr, "stand-in objc: over-release of a %s\n",
                 static_cast<standin_object*>(o)->isa->name.c_str());
    std::abort();
  }
}

void* standin_objc_autorelease(void* o) {
  if (o == nullptr) return o;
  std::vector<void*>& pools = autoreleased();
  if (pools.empty()) {
    unpooled.fetch_add(1);  // leaked, as Cocoa leaks it
    return o;
  }
  pools.push_back(o);
  return o;
}

// A pool is a marker (nullptr) in this thread's list; popping releases everything above it.
void* objc_autoreleasePoolPush(void) {
  std::vector<void*>& pools = autoreleased();
  pools.push_back(nullptr);
  return reinterpret_cast<void*>(pools.size());
}

void objc_autoreleasePoolPop(void* token) {
  size_t mark = reinterpret_cast<size_t>(token);
  std::vector<void*>& pools = autoreleased();
  if (mark == 0 || mark > pools.size() || pools[mark - 1] != nullptr) {
    std::fprintf(stderr, "stand-in objc: autorelease pools popped out of order\n");
    std::abort();
  }
  while (pools.size() >= mark) {
    void* o = pools.back();
    pools.pop_back();
    standin_objc_release(o);  // the marker itself is nullptr: a no-op
  }
}

long standin_objc_live_objects(void) { return live.load(); }
long standin_objc_unpooled_autoreleases(void) { return unpooled.load(); }

// NSObject's reference counting, with the prototypes of <objc/NSObject.h>.
static void* nsobject_retain(void* self, const void*) { return standin_objc_retain(self); }
static void nsobject_release(void* self, const void*) { standin_objc_release(self); }
static void* nsobject_autorelease(void* self, const void*) { return standin_objc_autorelease(self); }
static void* nsobject_init(void* self, const void*) { return self; }

__attribute__((constructor)) static void define_nsobject() {
  standin_class* c = standin_objc_define_class("NSObject", nullptr);
  standin_objc_add_method(c, "retain", reinterpret_cast<void*>(nsobject_retain), 0);
  standin_objc_add_method(c, "release", reinterpret_cast<void*>(nsobject_release), 0);
  standin_objc_add_method(c, "autorelease", reinterpret_cast<void*>(nsobject_autorelease), 0);
  standin_objc_add_method(c, "init", reinterpret_cast<void*>(nsobject_init), 0);
}

}  // extern "C"
