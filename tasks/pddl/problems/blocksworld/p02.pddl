(define (problem blocksworld-p02)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 - block
  )
  (:init
    (arm-empty)
    (clear b1)
    (clear b2)
    (clear b3)
    (on-table b1)
    (on-table b2)
    (on-table b3)
  )
  (:goal (and
    (on b1 b2)
    (on b3 b1)
  )))
