// Mover: the background thread that keeps tiers under their high watermark.
// It asks the EvictionPolicy how much to move and calls EngineCore::Demote
// (the mechanism) until each tier is at its low watermark.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace spillway::internal {

class EngineCore;

class Mover {
 public:
  explicit Mover(EngineCore* core);
  ~Mover();  // stops and joins

  void Start();
  void Stop();
  // Asks for a pass soon (cheap; call after any Put that crossed a watermark).
  void Wake();
  // Runs passes until one finds nothing to do (on the caller's thread when
  // the background thread is off).
  void WaitIdle();

 private:
  void Loop();
  // One pass over every tier; returns bytes moved.
  uint64_t Pass();

  EngineCore* core_;
  std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  bool stop_ = false;
  bool wake_ = false;
  uint64_t passes_started_ = 0;
  uint64_t last_idle_pass_ = 0;  // number of the latest pass that found nothing to move
  std::thread thread_;
};

}  // namespace spillway::internal
