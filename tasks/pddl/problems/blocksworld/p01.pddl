(define (problem blocksworld-p01)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 - block
  )
  (:init
    (arm-empty)
    (clear b1)
    (on b1 b2)
    (on b2 b3)
    (on-table b3)
  )
  (:goal (and
    (on b1 b3)
    (on b2 b1)
  )))
